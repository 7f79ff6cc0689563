// The chat's controls: model, temperature, max_tokens, and the JSON-schema output toggle
// with its schema. Only what cannot be sent is checked here (a schema that is not JSON);
// the gateway checks the rest and its words come back next to the control they name.

import { useId } from 'preact/hooks';
import { DetailedApiError } from '../api-detail.ts';
import { describedBy, Field } from '../components/index.ts';

export interface Settings {
  model: string;
  temperature: number;
  maxTokens: number;
  json: boolean;
  schemaName?: string;
  schemaText?: string;
}

export const EXAMPLE_SCHEMA = JSON.stringify(
  {
    type: 'object',
    properties: { title: { type: 'string', maxLength: 40 }, rating: { type: 'integer', enum: [1, 2, 3, 4, 5] } },
    required: ['title', 'rating'],
    additionalProperties: false,
  },
  null,
  2,
);

export type ErrorPlace = 'model' | 'temperature' | 'maxTokens' | 'schema' | 'message' | 'send';

/** Where an error belongs: the field its `param` names, else next to Send. */
export function placeOf(error: unknown): ErrorPlace {
  const param = error instanceof DetailedApiError ? (error.detail.param ?? '') : '';
  if (/^response_format/.test(param)) return 'schema';
  if (/^(max_tokens|max_completion_tokens)/.test(param)) return 'maxTokens';
  if (/^temperature/.test(param)) return 'temperature';
  if (/^model/.test(param)) return 'model';
  if (/^messages/.test(param)) return 'message';
  return 'send';
}

/** The response_format json_schema of these settings, or why it cannot be sent. */
export function jsonSchemaOf(s: Settings): { name: string; schema: unknown } | DetailedApiError | undefined {
  if (!s.json) return undefined;
  try {
    return { name: s.schemaName || 'answer', schema: JSON.parse(s.schemaText ?? EXAMPLE_SCHEMA) };
  } catch (e) {
    return new DetailedApiError(0, [`The schema is not JSON: ${(e as Error).message}`], {
      param: 'response_format.json_schema.schema',
    });
  }
}

/** Why these settings cannot be sent, if they cannot. */
export function settingsError(s: Settings): DetailedApiError | undefined {
  if (!s.model) return new DetailedApiError(0, ['Pick a model.'], { param: 'model' });
  const schema = jsonSchemaOf(s);
  return schema instanceof DetailedApiError ? schema : undefined;
}

/** The schema's name and the schema itself, shown while the JSON output is on. */
function SchemaFields({
  value: v,
  set,
  error,
}: {
  value: Settings;
  set: (p: Partial<Settings>) => void;
  error: unknown;
}) {
  const ids = { name: useId(), schema: useId() };
  return (
    <>
      <Field id={ids.name} label="Schema name">
        <input
          id={ids.name}
          value={v.schemaName ?? 'answer'}
          onInput={(e) => set({ schemaName: e.currentTarget.value })}
        />
      </Field>
      <Field id={ids.schema} label="JSON schema" error={error} hint="response_format: json_schema, strict">
        <textarea
          id={ids.schema}
          class="chat-schema"
          rows={8}
          spellcheck={false}
          value={v.schemaText ?? EXAMPLE_SCHEMA}
          onInput={(e) => set({ schemaText: e.currentTarget.value })}
          aria-invalid={error ? true : undefined}
          aria-describedby={describedBy(ids.schema, { error, hint: true })}
        />
      </Field>
    </>
  );
}

export function ChatSettings(props: {
  models: { id: string; warm?: boolean }[];
  loading: boolean;
  value: Settings;
  onChange: (s: Settings) => void;
  error: unknown;
  place: ErrorPlace;
}) {
  const ids = { model: useId(), temp: useId(), max: useId(), json: useId() };
  const v = props.value;
  const set = (patch: Partial<Settings>) => props.onChange({ ...v, ...patch });
  const at = (p: ErrorPlace) => (props.place === p ? props.error : undefined);
  return (
    <fieldset class="chat-settings">
      <legend>Request</legend>
      <div class="chat-grid">
        <Field id={ids.model} label="Model" error={at('model')}>
          <select
            id={ids.model}
            value={v.model}
            onChange={(e) => set({ model: e.currentTarget.value })}
            aria-describedby={describedBy(ids.model, { error: at('model') })}
          >
            {props.models.length === 0 && (
              <option value="">{props.loading ? 'Loading models…' : 'No model yet (see above)'}</option>
            )}
            {props.models.map((m) => (
              <option key={m.id} value={m.id}>
                {m.id}
                {m.warm ? ' (loaded)' : ''}
              </option>
            ))}
          </select>
        </Field>
        <Field id={ids.temp} label="Temperature" error={at('temperature')} hint="0 to 2">
          <input
            id={ids.temp}
            type="number"
            min={0}
            max={2}
            step={0.1}
            value={v.temperature}
            onInput={(e) => set({ temperature: e.currentTarget.valueAsNumber })}
            aria-describedby={describedBy(ids.temp, { error: at('temperature'), hint: true })}
          />
        </Field>
        <Field id={ids.max} label="max_tokens" error={at('maxTokens')} hint="The price basis: max_tokens × price">
          <input
            id={ids.max}
            type="number"
            min={1}
            step={1}
            value={v.maxTokens}
            onInput={(e) => set({ maxTokens: e.currentTarget.valueAsNumber })}
            aria-describedby={describedBy(ids.max, { error: at('maxTokens'), hint: true })}
          />
        </Field>
      </div>
      <Field id={ids.json} label="Answer in JSON that matches a schema" inline>
        <input
          id={ids.json}
          type="checkbox"
          checked={v.json}
          onChange={(e) => set({ json: e.currentTarget.checked })}
        />
      </Field>
      {v.json && <SchemaFields value={v} set={set} error={at('schema')} />}
    </fieldset>
  );
}
