/**
 * Where the collector's CPU goes, from a V8 CPU profile (`node --cpu-prof`) of the ingest
 * benchmark's collector: each sample of the measurement window is charged to the stage of the
 * data path that was running, found by walking from the sampled frame up its call stack to the
 * first frame of a file the stage owns (a Buffer copy or a regex inside the parser is parsing,
 * a socket write under COPY is COPY). Pure: profile and window in, shares out.
 */

export interface CpuProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children?: number[];
}

export interface CpuProfile {
  nodes: CpuProfileNode[];
  /** Microseconds, on the monotonic clock (CLOCK_MONOTONIC on Linux, as process.hrtime). */
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** The stages, in the order the report lists them. */
export const STAGES = [
  'SSH transport',
  'follower',
  'splitting',
  'parsing',
  'normalization',
  'batching',
  'row encoding',
  'COPY and store',
  'metrics and logging',
  'GC',
  'other JS',
  'idle',
] as const;
export type Stage = (typeof STAGES)[number];

/** First match wins, tested against a frame's url (file) and then its function name. */
const RULES: ReadonlyArray<{ stage: Stage; url?: RegExp; fn?: RegExp }> = [
  { stage: 'GC', fn: /^\(garbage collector\)$/ },
  { stage: 'idle', fn: /^\((?:idle|program)\)$/ },
  { stage: 'splitting', url: /\/logformat\/line-splitter\.ts$/ },
  { stage: 'normalization', url: /\/logformat\/normalize\/[^/]+\.ts$/ },
  { stage: 'parsing', url: /\/(?:logformat|parse)\/[^/]+(?:\/[^/]+)?\.ts$/ },
  { stage: 'batching', url: /\/collect\/batcher\.ts$/ },
  {
    stage: 'row encoding',
    url: /\/store\/(?:copy-binary|copy-binary-decode|encoded-rows|statement-row|slab-pool|event-rows|text-clean|iso-time|quarantine)\.ts$/,
  },
  { stage: 'COPY and store', url: /\/store\/|\/node_modules\/(?:pg|pg-protocol|pg-pool|pg-types)\// },
  { stage: 'SSH transport', url: /\/node_modules\/ssh2\/|\/transport\// },
  { stage: 'follower', url: /\/follow\/|\/collect\/(?:instance-stream|target-streams)\.ts$/ },
  { stage: 'metrics and logging', url: /\/observability\/|\/node_modules\/(?:prom-client|pino|pino-std-serializers|sonic-boom|thread-stream)\// },
];

function stageOfFrame(frame: CpuProfileNode['callFrame']): Stage | undefined {
  for (const r of RULES) {
    if (r.url !== undefined && frame.url !== '' && r.url.test(frame.url)) return r.stage;
    if (r.fn !== undefined && r.fn.test(frame.functionName)) return r.stage;
  }
  return undefined;
}

export interface StageShare {
  stage: Stage;
  /** CPU milliseconds charged in the window. */
  ms: number;
  /** Share of the busy (non-idle) time. */
  share: number;
}

export interface ProfileSplit {
  windowMs: number;
  busyMs: number;
  stages: StageShare[];
}

/**
 * Charges each sample taken in [fromUs, toUs] (monotonic microseconds; the whole profile when
 * left out) to a stage. A sample's weight is the time until the next sample.
 */
export function splitProfile(profile: CpuProfile, fromUs = -Infinity, toUs = Infinity): ProfileSplit {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stageOfNode = new Map<number, Stage>();
  const resolve = (id: number): Stage => {
    const known = stageOfNode.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    const own = node === undefined ? undefined : stageOfFrame(node.callFrame);
    const up = parent.get(id);
    const stage = own ?? (up === undefined ? 'other JS' : resolve(up));
    stageOfNode.set(id, stage);
    return stage;
  };
  const ms = new Map<Stage, number>(STAGES.map((s) => [s, 0]));
  let t = profile.startTime;
  let windowUs = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i] ?? 0;
    const weight = i + 1 < profile.timeDeltas.length ? profile.timeDeltas[i + 1]! : 0;
    if (t < fromUs || t > toUs) continue;
    windowUs += weight;
    const stage = resolve(profile.samples[i]!);
    ms.set(stage, ms.get(stage)! + weight / 1000);
  }
  const busyMs = [...ms].filter(([s]) => s !== 'idle').reduce((a, [, v]) => a + v, 0);
  return {
    windowMs: windowUs / 1000,
    busyMs,
    stages: STAGES.map((stage) => ({ stage, ms: ms.get(stage)!, share: stage === 'idle' ? NaN : ms.get(stage)! / busyMs })),
  };
}
