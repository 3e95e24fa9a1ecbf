/**
 * `pglog collect` options for transports: the promotion policy (docs/decisions/0007-transport-promotion.md) and how the
 * sshproxy sidecar is reached. Parsed once with the rest of the command line.
 */
import type { TransportConfig } from '@pglog/collector/collect/collect-types.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { DEFAULT_POLICY_SETTINGS, type PolicySettings, validatePolicyOptions } from '@pglog/common/promotion/policy.ts';

import { stringOptions } from './command-args.ts';
import { wholeNumberOption } from './whole-number-option.ts';

export const TRANSPORT_USAGE = `  --promote-above RATE      move an auto target to the sshproxy sidecar above RATE (default 1.25Mbit)
  --demote-below RATE       ... and back to the in-process client below RATE (default 0.75Mbit)
  --min-dwell MS            no target switches again sooner than MS (default 60000)
  --proxy-capacity N        at most N targets through the sidecar (default 64)
  --rate-window MS          time constant of the smoothed rate (default 30000)
  --sshproxy MODE           child: run 'pglog sshproxy' as a child process (default); external: a
                            sidecar started separately shares --sshproxy-dir; off: never proxy
  --sshproxy-dir DIR        the directory shared with the sidecar (child default: a private temp dir)
  RATE takes bits per second or a unit: 750kbit, 1.25Mbit, 1Gbit (powers of 1000, as networks count).`;

export const TRANSPORT_OPTIONS = stringOptions('promote-above', 'demote-below', 'min-dwell', 'proxy-capacity', 'rate-window', 'sshproxy', 'sshproxy-dir');

const RATE_UNITS: Record<string, number> = { '': 1, bit: 1, kbit: 1e3, mbit: 1e6, gbit: 1e9 };

/** `1.25Mbit` → 1250000 bits per second (also `1.25Mbit/s`, `750kbit`, `2000000`). */
export function parseBitRate(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)(?:\/s)?$/.exec(text.trim());
  if (m === null) return null;
  const unit = RATE_UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return null;
  const n = Number(m[1]) * unit;
  return Number.isFinite(n) && n > 0 ? n : null;
}

export function parseTransportConfig(values: Partial<Record<keyof typeof TRANSPORT_OPTIONS, string | undefined>>): TransportConfig {
  const rate = (flag: keyof typeof TRANSPORT_OPTIONS, fallback: number): number => {
    const text = values[flag];
    if (text === undefined) return fallback;
    const n = parseBitRate(text);
    if (n === null) throw new PglogError('USAGE', `collect: --${flag} must be a rate such as 1.25Mbit or 750kbit, got '${text}'`);
    return n;
  };
  const whole = (flag: keyof typeof TRANSPORT_OPTIONS, fallback: number, min: number): number =>
    wholeNumberOption('collect', `--${flag}`, values[flag], fallback, min);
  let policy: PolicySettings;
  try {
    policy = validatePolicyOptions({
      promoteAboveBitsPerS: rate('promote-above', DEFAULT_POLICY_SETTINGS.promoteAboveBitsPerS),
      demoteBelowBitsPerS: rate('demote-below', DEFAULT_POLICY_SETTINGS.demoteBelowBitsPerS),
      minDwellMs: whole('min-dwell', DEFAULT_POLICY_SETTINGS.minDwellMs, 0),
      proxyCapacity: whole('proxy-capacity', DEFAULT_POLICY_SETTINGS.proxyCapacity, 0),
    });
  } catch (e) {
    throw new PglogError('USAGE', `collect: ${(e as Error).message} (--promote-above, --demote-below, --min-dwell, --proxy-capacity)`);
  }
  const sidecar = values.sshproxy ?? 'child';
  if (sidecar !== 'child' && sidecar !== 'external' && sidecar !== 'off')
    throw new PglogError('USAGE', `collect: --sshproxy must be child, external or off, got '${sidecar}'`);
  const sidecarDir = values['sshproxy-dir'] ?? null;
  if (sidecar === 'external' && sidecarDir === null)
    throw new PglogError('USAGE', 'collect: --sshproxy external needs --sshproxy-dir DIR (the directory shared with the sidecar)');
  return {
    policy,
    rateTimeConstantMs: whole('rate-window', 30_000, 100),
    sidecar,
    sidecarDir,
  };
}
