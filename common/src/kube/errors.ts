/**
 * Kubernetes API failures as PglogErrors: the stable code says what a caller does about it
 * (retry, re-read, relist, give up), `status` and `reason` keep what the API server said.
 */
import { type ErrorCode, PglogError } from '../errors.ts';

export class KubeError extends PglogError {
  /** HTTP status; 0 when no response arrived (network error, timeout). */
  readonly status: number;
  /** The API Status reason (`Conflict`, `NotFound`, `AlreadyExists`, `Invalid`, `Expired`, `Gone`, ...), or ours for network failures (`NetworkError`, `Timeout`). */
  readonly reason: string;
  constructor(code: ErrorCode, message: string, status: number, reason: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'KubeError';
    this.status = status;
    this.reason = reason;
  }
}

export function isKubeError(e: unknown, code?: ErrorCode): e is KubeError {
  return e instanceof KubeError && (code === undefined || e.code === code);
}

/** The code for an HTTP status (and API reason: `Expired`/`Gone` are 410 whatever the status says). */
export function codeForStatus(status: number, reason = ''): ErrorCode {
  if (status === 410 || reason === 'Expired' || reason === 'Gone') return 'KUBE_GONE';
  if (status === 401 || status === 403) return 'KUBE_FORBIDDEN';
  if (status === 404) return 'KUBE_NOT_FOUND';
  if (status === 409) return 'KUBE_CONFLICT';
  if (status === 400 || status === 422) return 'KUBE_INVALID';
  // 429, 5xx and anything unexpected: the server may answer differently later.
  return 'KUBE_UNAVAILABLE';
}

const DEFAULT_REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Gone',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

/** What an API `Status` object carries that we use. */
export interface ApiStatus {
  code?: number;
  reason?: string;
  message?: string;
}

/**
 * The error for a non-2xx answer (or an ERROR watch event's Status). `where` is
 * `METHOD /path` without the query string (continue tokens are long and say nothing).
 */
export function kubeErrorFromStatus(where: string, status: number, body: ApiStatus | string): KubeError {
  const parsed = typeof body === 'string' ? parseStatus(body) : body;
  const reason = parsed.reason !== undefined && parsed.reason !== '' ? parsed.reason : (DEFAULT_REASONS[status] ?? 'Unknown');
  const detail = parsed.message ?? (typeof body === 'string' ? body.slice(0, 300).trim() : '');
  return new KubeError(codeForStatus(status, reason), `${where}: HTTP ${status} ${reason}${detail === '' ? '' : `: ${detail}`}`, status, reason);
}

/** A request that got no answer: connection refused or reset, TLS failure, timeout. */
export function kubeNetworkError(where: string, cause: unknown, timedOut = false): KubeError {
  const what = timedOut ? 'timed out' : `failed: ${cause instanceof Error ? cause.message : String(cause)}`;
  return new KubeError('KUBE_UNAVAILABLE', `${where}: ${what}`, 0, timedOut ? 'Timeout' : 'NetworkError', { cause });
}

function parseStatus(body: string): ApiStatus {
  try {
    const v = JSON.parse(body) as unknown;
    if (typeof v === 'object' && v !== null) {
      const o = v as Record<string, unknown>;
      return {
        ...(typeof o['code'] === 'number' ? { code: o['code'] } : {}),
        ...(typeof o['reason'] === 'string' ? { reason: o['reason'] } : {}),
        ...(typeof o['message'] === 'string' ? { message: o['message'] } : {}),
      };
    }
  } catch {
    // Not JSON (a proxy's HTML page, say): the caller shows the start of the body.
  }
  return {};
}
