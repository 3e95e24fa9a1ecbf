/**
 * Text from monitored servers made safe to print on a terminal. Database, user, relation and
 * application names, query texts and messages are bytes any client can choose (a startup
 * packet's database name reaches a FATAL line unauthenticated), and a terminal obeys the
 * control characters among them: ESC and CSI (U+009B) start sequences that move the cursor,
 * erase rows, set the title or write the clipboard (OSC 52); bidi overrides reorder what is
 * shown. Each such character becomes a visible escape (`\x1b`, `\u202e`), so the reader sees
 * that it was there and the terminal gets only printable text. Pure.
 *
 * The escape is for reading, not reversible (a backslash is left as it is); `--json` keeps
 * the exact text.
 */

/**
 * C0 controls (U+0000..U+001F: newline and tab too, a caller keeps its own line breaks with
 * `escapeLines`), DEL, C1 controls (U+0080..U+009F: U+009B is CSI on terminals that take
 * 8-bit controls), and the bidi embeddings, overrides and isolates (U+202A..U+202E,
 * U+2066..U+2069) that can make text read differently from what it is.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function visible(c: string): string {
  const code = c.charCodeAt(0);
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** `s` with every unsafe character as a visible escape: one line, fit for a table cell. Idempotent. */
export function escapeControls(s: string): string {
  return s.replace(UNSAFE, visible);
}

/** A text of several lines: each line escaped, the newlines between them kept. */
export function escapeLines(text: string): string {
  return text.split('\n').map(escapeControls).join('\n');
}
