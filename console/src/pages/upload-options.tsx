import { useId } from 'preact/hooks';
import { useCapabilities } from '../capabilities.ts';
import { FeatureOff, Field } from '../components/index.ts';

// What a new asset is made with: a renditions preset (mapped to `profiles`; the default
// ladder is the server's own), MP4 renditions (`staticMp4`) and C2PA signing (`c2pa`, which
// signs the MP4s and so needs them), offered only where the server is set up for it
// (GET /api/capabilities); elsewhere the page says what enabling it takes.

interface Profile {
  name: string;
  width: number;
  height: number;
  bitrate: number;
}

export const PRESETS: { id: string; label: string; profiles?: Profile[] }[] = [
  { id: 'default', label: 'Default ladder (360p and 720p)' },
  { id: 'small', label: 'Small: 240p only', profiles: [{ name: '240p0', width: 426, height: 240, bitrate: 400_000 }] },
  { id: 'sd', label: 'SD: 360p only', profiles: [{ name: '360p0', width: 640, height: 360, bitrate: 1_000_000 }] },
  {
    id: 'hd',
    label: 'HD: 360p, 720p and 1080p',
    profiles: [
      { name: '360p0', width: 640, height: 360, bitrate: 1_000_000 },
      { name: '720p0', width: 1280, height: 720, bitrate: 4_000_000 },
      { name: '1080p0', width: 1920, height: 1080, bitrate: 6_000_000 },
    ],
  },
];

export interface AssetOptions {
  preset: string;
  staticMp4: boolean;
  c2pa: boolean;
}

export const DEFAULT_OPTIONS: AssetOptions = { preset: 'default', staticMp4: false, c2pa: false };

/** The fields of a create request (request-upload, upload/url) for these options. */
export function optionsBody(o: AssetOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  const profiles = PRESETS.find((p) => p.id === o.preset)?.profiles;
  if (profiles) body.profiles = profiles;
  if (o.staticMp4 || o.c2pa) body.staticMp4 = true;
  if (o.c2pa) body.c2pa = true;
  return body;
}

export function OptionsFields({ value, onChange }: { value: AssetOptions; onChange(o: AssetOptions): void }) {
  const preset = useId();
  const mp4 = useId();
  const c2pa = useId();
  const caps = useCapabilities();
  return (
    <fieldset class="card">
      <legend>Options for new assets</legend>
      <Field id={preset} label="Renditions">
        <select
          id={preset}
          value={value.preset}
          onChange={(e) => onChange({ ...value, preset: e.currentTarget.value })}
        >
          {PRESETS.map((p) => (
            <option key={p.id} value={p.id}>
              {p.label}
            </option>
          ))}
        </select>
      </Field>
      <Field id={mp4} label="Also make MP4 downloads" inline>
        <input
          id={mp4}
          type="checkbox"
          checked={value.staticMp4 || value.c2pa}
          disabled={value.c2pa}
          onChange={(e) => onChange({ ...value, staticMp4: e.currentTarget.checked })}
        />
      </Field>
      {caps?.c2pa.enabled ? (
        <Field id={c2pa} label="Sign the MP4s with C2PA" inline hint="Signing needs the MP4s: they are made too.">
          <input
            id={c2pa}
            type="checkbox"
            checked={value.c2pa}
            aria-describedby={`${c2pa}-hint`}
            onChange={(e) => onChange({ ...value, c2pa: e.currentTarget.checked })}
          />
        </Field>
      ) : (
        caps && <FeatureOff title="C2PA signing of the MP4s" feature={caps.c2pa} />
      )}
    </fieldset>
  );
}
