import { defineSettings } from './types.ts';

// Settings of the orchestrator role: where models live, which engine runs them, what it
// charges, and the tuning variables. The tuning variables keep the unprefixed names of the
// spec (API.md section B, the vLLM convention) so existing deployment files carry over;
// they are checked again at start-up against the model's GGUF metadata (llm/orchestrator/tuning.ts).
export const orchestratorSettings = defineSettings({
  modelsDir: {
    env: 'MEDIAPLANE_MODELS_DIR',
    type: 'string',
    group: 'orchestrator',
    default: './models',
    description:
      'Model directory laid out like the hub: <dir>/<org>/<model_name>/*.gguf. `mediaplane models pull` puts models there, and `start` and `orchestrator` offer every model they find there; an absent warm model (MEDIAPLANE_ORCHESTRATOR_MODELS) is downloaded into it at start when the network allows.',
  },
  orchestratorModels: {
    env: 'MEDIAPLANE_ORCHESTRATOR_MODELS',
    type: 'list',
    group: 'orchestrator',
    default: [],
    description:
      'Models (<org>/<model_name>) loaded at start-up (warm); others found in the model directory are offered cold and loaded on first use.',
  },
  orchestratorEngine: {
    env: 'MEDIAPLANE_ORCHESTRATOR_ENGINE',
    type: 'enum',
    group: 'orchestrator',
    default: 'llama.cpp',
    values: ['llama.cpp', 'vllm'] as const,
    description:
      'Inference engine: llama.cpp (node-llama-cpp, GGUF, CPU/CUDA/Vulkan) or vllm (an OpenAI-compatible vLLM server, for GPU clusters).',
  },
  orchestratorPricePerToken: {
    env: 'MEDIAPLANE_ORCHESTRATOR_PRICE_PER_TOKEN',
    type: 'number',
    group: 'orchestrator',
    default: 0,
    min: 0,
    description:
      'Price in USD per output token advertised to gateways (reference: 0.00000008, i.e. 0.08 USD per 1M tokens for an 8B model); 0 is free.',
  },
  orchestratorSecret: {
    env: 'MEDIAPLANE_ORCHESTRATOR_SECRET',
    type: 'string',
    group: 'orchestrator',
    default: undefined,
    secret: true,
    description:
      'Shared secret between gateways and orchestrators: required on orchestrator routes (all but /healthz and /metrics) and for self-registration. A standalone orchestrator on a non-loopback MEDIAPLANE_HOST refuses to start without it; unset, mediaplane start keeps a generated one for its local orchestrator in the data dir.',
  },
  orchestratorRegisterWith: {
    env: 'MEDIAPLANE_ORCHESTRATOR_REGISTER_WITH',
    type: 'list',
    group: 'orchestrator',
    default: [],
    description:
      'Gateway base URLs this orchestrator registers itself with (needs MEDIAPLANE_ORCHESTRATOR_SECRET and MEDIAPLANE_ORCHESTRATOR_PUBLIC_URL).',
  },
  orchestratorPublicUrl: {
    env: 'MEDIAPLANE_ORCHESTRATOR_PUBLIC_URL',
    type: 'string',
    group: 'orchestrator',
    default: undefined,
    description: 'The URL gateways reach this orchestrator at, sent when it registers.',
  },
  orchestratorQueueMs: {
    env: 'MEDIAPLANE_ORCHESTRATOR_QUEUE_MS',
    type: 'int',
    group: 'orchestrator',
    default: 2000,
    min: 0,
    description:
      'How long a request beyond capacity (MAX_NUM_SEQS busy) waits for a free slot before it is refused with 503.',
  },
  orchestratorMaxQueue: {
    env: 'MEDIAPLANE_ORCHESTRATOR_MAX_QUEUE',
    type: 'int',
    group: 'orchestrator',
    default: 64,
    min: 0,
    description: 'Requests that may wait per model; more are refused with 503 at once.',
  },
  orchestratorStreamIntervalMs: {
    env: 'MEDIAPLANE_ORCHESTRATOR_STREAM_INTERVAL_MS',
    type: 'int',
    group: 'orchestrator',
    default: 30,
    min: 0,
    max: 1000,
    description:
      'Least time between two SSE writes of one stream: tokens that come faster are merged into one chunk (the first token is never held; a model slower than one token per interval keeps one chunk per token). Saves writes and wake-ups in the orchestrator, the gateway and the client when a model outruns its readers; 0 writes every token on its own.',
  },
  llmThreads: {
    env: 'MEDIAPLANE_LLM_THREADS',
    type: 'int',
    group: 'orchestrator',
    default: 1,
    min: 0,
    max: 1024,
    description:
      'CPU threads llama.cpp uses per model (0: all cores). Default measured on a 2-core host with small models: 1 thread ~1800 tok/s, 2 ~150, 0 (auto) ~190; raise it for large models on many cores.',
  },
  llmGpu: {
    env: 'MEDIAPLANE_LLM_GPU',
    type: 'enum',
    group: 'orchestrator',
    default: 'auto',
    values: ['auto', 'cpu', 'cuda', 'vulkan', 'metal'] as const,
    description: 'llama.cpp backend: auto picks CUDA/Vulkan/Metal when present, else CPU.',
  },
  llmQuantization: {
    env: 'MEDIAPLANE_LLM_QUANTIZATION',
    type: 'string',
    group: 'orchestrator',
    default: undefined,
    defaultText: 'the smallest file (Q8_0 when USE_8BIT)',
    description:
      'Which GGUF of a model folder to load when it holds several, matched in the file name (e.g. Q4_K_M); also the file `mediaplane models pull` downloads when --quantization is not given (unset there: Q4_K_M, else the nearest the model has).',
  },
  modelHubUrl: {
    env: 'MEDIAPLANE_MODEL_HUB_URL',
    type: 'string',
    group: 'orchestrator',
    default: 'https://huggingface.co',
    description:
      "Model hub (huggingface.co's API) that `mediaplane models pull` and absent warm models download GGUF files of <org>/<model_name> from; each file is checked against the hub's sha256 before it is installed.",
  },
  vllmUrl: {
    env: 'MEDIAPLANE_VLLM_URL',
    type: 'string',
    group: 'orchestrator',
    default: undefined,
    description: 'With the vllm engine: reach an already running vLLM server at this URL instead of starting one.',
  },
  vllmCommand: {
    env: 'MEDIAPLANE_VLLM_COMMAND',
    type: 'list',
    group: 'orchestrator',
    default: ['vllm', 'serve'],
    description:
      'With the vllm engine: the command (comma-separated words) that starts a vLLM server; the model and flags are appended.',
  },
  vllmStartTimeoutMs: {
    env: 'MEDIAPLANE_VLLM_START_TIMEOUT_MS',
    type: 'int',
    group: 'orchestrator',
    default: 600_000,
    min: 100,
    description: 'How long a started vLLM server may take to answer /health.',
  },

  use8bit: {
    env: 'USE_8BIT',
    type: 'bool',
    group: 'orchestrator',
    default: false,
    description:
      '8-bit weights/KV cache for lower memory (llama.cpp: q8_0 KV cache and a Q8_0 file when present; vLLM: --quantization fp8 --kv-cache-dtype fp8).',
  },
  pipelineParallelSize: {
    env: 'PIPELINE_PARALLEL_SIZE',
    type: 'int',
    group: 'orchestrator',
    default: 1,
    min: 1,
    description: "Pipeline stages (devices in sequence); at most the model's number of layers.",
  },
  tensorParallelSize: {
    env: 'TENSOR_PARALLEL_SIZE',
    type: 'int',
    group: 'orchestrator',
    default: 1,
    min: 1,
    description: "Devices a layer is split across; must divide the model's number of attention heads.",
  },
  maxModelLen: {
    env: 'MAX_MODEL_LEN',
    type: 'int',
    group: 'orchestrator',
    default: 8192,
    min: 16,
    description:
      "Max tokens per sequence (prompt + output); above the model's trained context is refused, and left at its default the model's own context is used when smaller.",
  },
  maxNumBatchedTokens: {
    env: 'MAX_NUM_BATCHED_TOKENS',
    type: 'int',
    group: 'orchestrator',
    default: 8192,
    min: 1,
    description: 'Tokens evaluated in one batch (llama.cpp batch size); must be >= MAX_MODEL_LEN.',
  },
  maxNumSeqs: {
    env: 'MAX_NUM_SEQS',
    type: 'int',
    group: 'orchestrator',
    default: 128,
    min: 1,
    max: 4096,
    description: 'Sequences decoded together per model (concurrent requests sharing one batch: continuous batching).',
  },
  gpuMemoryUtilization: {
    env: 'GPU_MEMORY_UTILIZATION',
    type: 'number',
    group: 'orchestrator',
    default: 0.97,
    exclusiveMin: 0,
    max: 1,
    description: 'Share of GPU memory the engine may use (0 < x <= 1).',
  },
});
