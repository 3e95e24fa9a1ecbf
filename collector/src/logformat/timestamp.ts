/**
 * Log timestamps → ISO 8601 with an offset.
 *
 * Inputs: `%t`/`%s` (`2024-01-02 03:04:05 TZ`), `%m` and csvlog/jsonlog
 * (`2024-01-02 03:04:05.123 TZ`), `%n` (`1700000000.123`, Unix epoch).
 * The zone is converted when it is UTC/GMT/UT/Z, numeric (`+03`, `-0330`, `+05:30`) or an
 * unambiguous abbreviation of the table below; then the result is e.g.
 * `2024-01-02T03:04:05.123Z` (zero offset) or `2024-01-02T03:04:05.123+03:00`. The fraction is
 * kept as logged (none for `%t`). Anything else is returned as logged: a wrong offset is worse
 * than none. Ambiguous abbreviations are deliberately missing: IST (India/Ireland/Israel),
 * CST (US Central/China/Cuba), BST (British/Bangladesh), AST (Atlantic/Arabia).
 */

/** Abbreviation → offset (`Z` or `±HH:MM`). */
const ZONES: ReadonlyMap<string, string> = new Map([
  ['UTC', 'Z'],
  ['GMT', 'Z'],
  ['UT', 'Z'],
  ['Z', 'Z'],
  ['ZULU', 'Z'],
  ['WET', 'Z'],
  ['WEST', '+01:00'],
  ['CET', '+01:00'],
  ['CEST', '+02:00'],
  ['MET', '+01:00'],
  ['MEST', '+02:00'],
  ['EET', '+02:00'],
  ['EEST', '+03:00'],
  ['MSK', '+03:00'],
  ['MSD', '+04:00'],
  ['SAST', '+02:00'],
  ['PKT', '+05:00'],
  ['WIB', '+07:00'],
  ['HKT', '+08:00'],
  ['SGT', '+08:00'],
  ['AWST', '+08:00'],
  ['JST', '+09:00'],
  ['KST', '+09:00'],
  ['ACST', '+09:30'],
  ['ACDT', '+10:30'],
  ['AEST', '+10:00'],
  ['AEDT', '+11:00'],
  ['NZST', '+12:00'],
  ['NZDT', '+13:00'],
  ['BRT', '-03:00'],
  ['ART', '-03:00'],
  ['NST', '-03:30'],
  ['NDT', '-02:30'],
  ['ADT', '-03:00'],
  ['EST', '-05:00'],
  ['EDT', '-04:00'],
  ['CDT', '-05:00'],
  ['MST', '-07:00'],
  ['MDT', '-06:00'],
  ['PST', '-08:00'],
  ['PDT', '-07:00'],
  ['AKST', '-09:00'],
  ['AKDT', '-08:00'],
  ['HST', '-10:00'],
]);

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

function allDigits(s: string, from: number, to: number): boolean {
  if (from >= to) return false;
  for (let i = from; i < to; i++) if (!isDigit(s.charCodeAt(i))) return false;
  return true;
}

/** `+03`, `-0330`, `+05:30`, `+5` → `±HH:MM`; `+00` → `Z`; otherwise null. */
function numericZone(z: string): string | null {
  const sign = z.charCodeAt(0);
  if (sign !== 43 && sign !== 45) return null;
  let hh: string;
  let mm = '00';
  const body = z.slice(1);
  if (/^\d{1,2}$/.test(body)) hh = body.padStart(2, '0');
  else if (/^\d{4}$/.test(body)) {
    hh = body.slice(0, 2);
    mm = body.slice(2);
  } else if (/^\d{1,2}:\d{2}$/.test(body)) {
    const [h, m] = body.split(':') as [string, string];
    hh = h.padStart(2, '0');
    mm = m;
  } else return null;
  if (Number(hh) > 15 || Number(mm) > 59) return null;
  if (hh === '00' && mm === '00') return 'Z';
  return `${z[0]}${hh}:${mm}`;
}

const zoneCache = new Map<string, string | null>();

function offsetOf(zone: string): string | null {
  const cached = zoneCache.get(zone);
  if (cached !== undefined) return cached;
  const offset = ZONES.get(zone.toUpperCase()) ?? numericZone(zone);
  if (zoneCache.size < 256) zoneCache.set(zone, offset);
  return offset;
}

/** Epoch seconds with an optional fraction (`%n`) → ISO in UTC, or null. */
function fromEpoch(text: string): string | null {
  const dot = text.indexOf('.');
  const secs = dot === -1 ? text : text.slice(0, dot);
  const frac = dot === -1 ? '' : text.slice(dot + 1);
  if (!allDigits(secs, 0, secs.length) || secs.length > 12) return null;
  if (dot !== -1 && !allDigits(frac, 0, frac.length)) return null;
  const date = new Date(Number(secs) * 1000);
  if (Number.isNaN(date.getTime())) return null;
  const iso = date.toISOString(); // yyyy-mm-ddThh:mm:ss.000Z
  return iso.slice(0, 19) + (frac === '' ? '' : `.${frac}`) + 'Z';
}

let lastText = '';
let lastIso = '';
/**
 * The last dated conversion with a fraction, by parts: consecutive `%m` timestamps mostly
 * differ only in their milliseconds, so the date, the clock up to the seconds and the zone are
 * compared with that timestamp's (character by character: both are flat strings) and the
 * fraction is put between the converted parts.
 */
let lastDated = ''; // `yyyy-mm-dd hh:mm:ss.fff ZONE` as logged
let lastFractionEnd = 0; // index of the space before the zone in lastDated
let lastHead = ''; // `yyyy-mm-ddThh:mm:ss`
let lastOffset = '';

/** A log timestamp as ISO 8601 with offset when the zone is known; otherwise as logged. */
export function toIsoTimestamp(text: string): string {
  // Consecutive entries often share a timestamp (%t has whole seconds).
  if (text === lastText) return lastIso;
  const iso = sameSecond(text) ?? convert(text);
  lastText = text;
  lastIso = iso;
  return iso;
}

/** The conversion of a timestamp of the same second and zone as the last one with a fraction, or null. */
function sameSecond(text: string): string | null {
  const last = lastDated;
  const n = text.length;
  if (n !== last.length || n === 0 || text.charCodeAt(19) !== 46) return null;
  for (let k = 18; k >= 0; k--) if (text.charCodeAt(k) !== last.charCodeAt(k)) return null;
  const end = lastFractionEnd;
  for (let k = 20; k < end; k++) if (!isDigit(text.charCodeAt(k))) return null;
  for (let k = end; k < n; k++) if (text.charCodeAt(k) !== last.charCodeAt(k)) return null;
  return lastHead + text.slice(19, end) + lastOffset;
}

function convert(text: string): string {
  // yyyy-mm-dd hh:mm:ss[.fff] ZONE
  if (text.length >= 19 && text.charCodeAt(4) === 45 && text.charCodeAt(10) === 32) {
    if (
      !allDigits(text, 0, 4) ||
      !allDigits(text, 5, 7) ||
      !allDigits(text, 8, 10) ||
      !allDigits(text, 11, 13) ||
      !allDigits(text, 14, 16) ||
      !allDigits(text, 17, 19) ||
      text.charCodeAt(7) !== 45 ||
      text.charCodeAt(13) !== 58 ||
      text.charCodeAt(16) !== 58
    )
      return text;
    let i = 19;
    if (text.charCodeAt(i) === 46) {
      i++;
      while (i < text.length && isDigit(text.charCodeAt(i))) i++;
      if (i === 20) return text;
    }
    const clock = text.slice(11, i);
    if (i === text.length) return text; // no zone: cannot say which instant
    if (text.charCodeAt(i) !== 32) return text;
    const offset = offsetOf(text.slice(i + 1));
    if (offset === null) return text;
    if (i > 19) {
      lastDated = text;
      lastFractionEnd = i;
      lastHead = `${text.slice(0, 10)}T${text.slice(11, 19)}`;
      lastOffset = offset;
    }
    return `${text.slice(0, 10)}T${clock}${offset}`;
  }
  return fromEpoch(text) ?? text;
}
