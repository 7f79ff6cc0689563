// The limit settings of a key and of its owner, as ONE table of descriptors. Everything that
// spells a setting out is derived from it: the columns' checks and SQL (limits.ts,
// key-settings.ts), the wire schema (api/contract/api-key.ts), the CLI's flags and help
// (cli/keys.ts) and the docs table (docs/keys.md, `npm run docs:settings`). Adding a limit is a
// descriptor here, its column (a migration), and the admission that enforces it.

export type BudgetPeriod = 'day' | 'month' | 'total';
export const BUDGET_PERIODS: readonly BudgetPeriod[] = ['day', 'month', 'total'];

/** What a setting's value is, in the code (`value`) and as the driver reads its column (`column`). */
interface Kinds {
  /** A whole number; on a key 0 means "no limit". */
  count: { value: number; column: number };
  /** USD as exact decimal text (numeric). */
  usd: { value: string; column: string };
  period: { value: BudgetPeriod; column: BudgetPeriod };
  /** Model ids; ['*'] on a key: every model. */
  models: { value: string[]; column: string[] };
  date: { value: Date; column: Date | string };
}
export type LimitKind = keyof Kinds;

/**
 * Where a setting is enforced. `request-window`: counted per request of the key (the auth step,
 * or the statement its route makes anyway); `llm-charge`: the LLM routes' hold (key_hold);
 * `llm-model`: the LLM routes' model check; `task`: a task's admission (key_task_admission);
 * `auth`: the key's lookup.
 */
export type Admission = 'auth' | 'request-window' | 'llm-charge' | 'llm-model' | 'task';

export const ADMISSION_TEXT: Record<Admission, string> = {
  auth: 'every request, as the key is looked up',
  'request-window': "every request, counted in the key's rate windows",
  'llm-charge': "each LLM request's charge (`key_hold`)",
  'llm-model': 'each LLM request, before it is routed',
  task: 'each task the key makes or requeues (`key_task_admission`)',
};

export interface LimitDescriptor {
  /** The setting's name in the code, on the wire (GET /api/key) and in validation messages. */
  field: string;
  /** Its column on api_keys and (unless keyOnly) owner_limits. */
  column: string;
  kind: LimitKind;
  /** What it is called in prose (the docs table). */
  title: string;
  /** The CLI flag (`--flag VALUE`) and what its value is. */
  flag: string;
  flagValue: string;
  /** One help line (CLI help, the wire schema's description). */
  help: string;
  /** The unit it is counted in (docs, the wire schema). */
  unit: string;
  /** A count's largest value (its column's type bounds it); counts start at 1, or 0 on a key (no limit). */
  max?: number;
  /** What it limits, in the docs' words. */
  limits: string;
  /** How a request past it is answered; '' for a setting that refuses nothing itself. */
  refusedWith: string;
  admission: readonly Admission[];
  /** A value of the flag, as an operator would type it (docs and tests). */
  example: string;
  /** A key's setting only: an owner has no default for it. */
  keyOnly?: boolean;
}

/** The largest count (PostgreSQL's integer). */
export const MAX_COUNT = 2_147_483_647;

export const LIMIT_SETTINGS = [
  {
    field: 'requestsPerMinute',
    column: 'requests_per_minute',
    kind: 'count',
    title: 'requests per minute',
    flag: 'rpm',
    flagValue: 'N',
    help: 'requests per minute, every authenticated route of both APIs',
    unit: 'requests per rate window',
    limits: 'every authenticated request of the key, task API and LLM routes together',
    refusedWith: '429',
    admission: ['request-window'],
    example: '60',
    max: MAX_COUNT,
  },
  {
    field: 'tokensPerMinute',
    column: 'tokens_per_minute',
    kind: 'count',
    title: 'tokens per minute',
    flag: 'tpm',
    flagValue: 'N',
    help: 'LLM tokens per minute (max_tokens x n when admitted, settled on use)',
    unit: 'tokens per rate window',
    limits:
      'LLM tokens: a request takes its `max_tokens` (times `n`, times the prompts of a text completion) from the window when it is admitted, and gives back what it did not use when it settles',
    refusedWith: '429 (400 when one request alone asks for more than the limit)',
    admission: ['request-window', 'llm-charge'],
    example: '20000',
    max: MAX_COUNT,
  },
  {
    field: 'concurrentTranscodes',
    column: 'concurrent_transcodes',
    kind: 'count',
    title: 'concurrent transcodes',
    flag: 'concurrent-transcodes',
    flagValue: 'N',
    help: 'transcodes, uploads and clips waiting or running at once, together',
    unit: 'tasks',
    limits:
      "the key's tasks that encode, waiting or running at once: transcodes, uploads and clips together (see [which routes](#which-routes-the-task-limits-admit))",
    refusedWith: '429',
    admission: ['task'],
    example: '4',
    max: MAX_COUNT,
  },
  {
    field: 'budgetUsd',
    column: 'budget_usd',
    kind: 'usd',
    title: 'budget',
    flag: 'budget',
    flagValue: 'USD',
    help: 'USD per period on top of the credit balance (LLM charges)',
    unit: 'USD per budget period',
    limits:
      "USD the key's LLM requests are charged per budget period, on top of the owner's credit balance; a key whose budget is spent also queues no new transcode, upload or clip, and retries none",
    refusedWith: '402 on the LLM routes, 429 on the task API, naming the budget',
    admission: ['llm-charge', 'task'],
    example: '5',
  },
  {
    field: 'budgetPeriod',
    column: 'budget_period',
    kind: 'period',
    title: 'budget period',
    flag: 'budget-period',
    flagValue: 'P',
    help: 'day, month (UTC calendar) or total (default total)',
    unit: 'a calendar day or month (UTC), or `total`',
    limits: "the budget's period: a calendar day or month (UTC) or the key's whole life (`total`, the default)",
    refusedWith: '',
    admission: ['llm-charge', 'task'],
    example: 'month',
  },
  {
    field: 'models',
    column: 'models',
    kind: 'models',
    title: 'models',
    flag: 'models',
    flagValue: 'A,B',
    help: "the model ids the key may use ('*': every model)",
    unit: 'model ids',
    limits: 'the model ids the key may use (`*`: all)',
    refusedWith: '403 naming the model',
    admission: ['llm-model'],
    example: 'meta-llama/Llama-3.1-8B-Instruct',
  },
  {
    field: 'expiresAt',
    column: 'expires_at',
    kind: 'date',
    title: 'expiry',
    flag: 'expires',
    flagValue: 'WHEN',
    help: 'an ISO date (2027-01-31, 2027-01-31T12:00:00Z) or a duration from now (30d, 12h)',
    unit: 'a date',
    limits: 'a date after which the key is refused',
    refusedWith: '401',
    admission: ['auth'],
    example: '30d',
    keyOnly: true,
  },
] as const satisfies readonly LimitDescriptor[];

type Descriptor = (typeof LIMIT_SETTINGS)[number];
/** The settings an owner has defaults for: every one but the key-only ones. */
export type OwnerDescriptor = Exclude<Descriptor, { keyOnly: true }>;
/** The count settings (their effective limit is a number, or null: none). */
export type CountField = Extract<Descriptor, { kind: 'count' }>['field'];

/**
 * Settings as stored on a key or its owner: null means "not set here" (a key then takes its
 * owner's default); 0 on a key means "no limit" and lifts an owner's default. In an update,
 * an absent field is left as it is.
 */
export type LimitSettings = { [D in Descriptor as D['field']]?: Kinds[D['kind']]['value'] | null };

/** The settings of a row as the API and the CLI show them (null: not set here); an owner's has no key-only ones. */
export type OwnerSettings = { [D in OwnerDescriptor as D['field']]: Kinds[D['kind']]['value'] | null };

/** The columns of a settings row (api_keys or owner_limits), as the driver returns them. */
export type LimitColumns = { [D in OwnerDescriptor as D['column']]: Kinds[D['kind']]['column'] | null };

/** An owner's defaults as `limitColumns(table, 'o_')` selects them beside a key's. */
export type OwnerLimitColumns = { [C in keyof LimitColumns as `o_${C}`]: LimitColumns[C] };

/** The descriptors an owner has defaults for. */
export const OWNER_SETTINGS: readonly OwnerDescriptor[] = LIMIT_SETTINGS.filter(
  (d): d is OwnerDescriptor => !('keyOnly' in d),
);

/** The columns of a settings row, in the table's order. */
export const LIMIT_COLUMNS: readonly (keyof LimitColumns)[] = OWNER_SETTINGS.map((d) => d.column);

/** The count settings. */
export const COUNT_SETTINGS = LIMIT_SETTINGS.filter(
  (d): d is Extract<Descriptor, { kind: 'count' }> => d.kind === 'count',
);

/** The docs table of the limits (docs/keys.md between its markers; `npm run docs:settings` writes it). */
export function limitsDocTable(): string {
  const cell = (s: string) => s.replaceAll('|', '\\|');
  const rows = LIMIT_SETTINGS.map((d: LimitDescriptor) =>
    [
      d.title,
      `\`--${d.flag} ${d.flagValue}\`${d.keyOnly ? ' (keys only)' : ''}`,
      `\`${d.field}\``,
      cell(d.unit),
      cell(d.limits),
      d.admission.map((a) => ADMISSION_TEXT[a]).join('; '),
      cell(d.refusedWith || '(none itself)'),
    ].join(' | '),
  );
  return [
    '| setting | CLI flag | wire field | unit | what it limits | checked at | refused with |',
    '|---|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r} |`),
  ].join('\n');
}
