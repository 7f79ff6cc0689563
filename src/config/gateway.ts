import { defineSettings } from './types.ts';

// Settings of the LLM gateway role (POST /llm, /v1/*): where orchestrators are, how
// requests are priced and settled.
export const gatewaySettings = defineSettings({
  gatewayOrchestrators: {
    env: 'MEDIAPLANE_GATEWAY_ORCHESTRATORS',
    type: 'list',
    group: 'llm',
    default: [],
    description:
      'Orchestrator base URLs (comma-separated) the gateway polls; more may register themselves with MEDIAPLANE_ORCHESTRATOR_SECRET.',
  },
  gatewayPollMs: {
    env: 'MEDIAPLANE_GATEWAY_POLL_MS',
    type: 'int',
    group: 'llm',
    default: 5000,
    min: 50,
    description: "How often the gateway refreshes each orchestrator's models, price and free capacity.",
  },
  gatewayDefaultMaxTokens: {
    env: 'MEDIAPLANE_GATEWAY_DEFAULT_MAX_TOKENS',
    type: 'int',
    group: 'llm',
    default: 256,
    min: 1,
    description: 'max_tokens of a request that gives none (the price basis).',
  },
  gatewayMaxPricePerToken: {
    env: 'MEDIAPLANE_GATEWAY_MAX_PRICE_PER_TOKEN',
    type: 'number',
    group: 'llm',
    default: 0,
    min: 0,
    description:
      'Operator price ceiling in USD per output token; orchestrators above it are not used (0: no ceiling). Callers may lower it per request with max_price_per_token.',
  },
  gatewayUsageBased: {
    env: 'MEDIAPLANE_GATEWAY_USAGE_BASED',
    type: 'bool',
    group: 'llm',
    default: false,
    description:
      'Usage-based settlement: reserve max_tokens x price, then charge the actual completion tokens and refund the rest.',
  },
  gatewayFirstTokenTimeoutMs: {
    env: 'MEDIAPLANE_GATEWAY_FIRST_TOKEN_TIMEOUT_MS',
    type: 'int',
    group: 'llm',
    default: 60_000,
    min: 100,
    description:
      'How long an orchestrator may take to send the first token before the gateway tries the next one (504 when none answers).',
  },
  gatewayIdleTimeoutMs: {
    env: 'MEDIAPLANE_GATEWAY_IDLE_TIMEOUT_MS',
    type: 'int',
    group: 'llm',
    default: 60_000,
    min: 100,
    description: 'Longest silence between two tokens before a started answer is ended with an error.',
  },
});
