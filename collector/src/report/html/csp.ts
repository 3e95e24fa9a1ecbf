/**
 * The HTML report's Content-Security-Policy and the inline elements it allows (security review
 * R11). The page is generated, so its scripts and styles are known: the policy names each by
 * the sha256 of its text instead of allowing any inline script (`'unsafe-inline'`). Markup
 * injected through an escape that was missed would then not run, nor load or send anything
 * (`default-src 'none'`), nor redirect relative links (`base-uri`) or submit a form
 * (`form-action`). Pure.
 */
import { createHash } from 'node:crypto';

import { PglogError } from '@pglog/common/errors.ts';

/** A <script> or <style> element and the CSP source expression that allows exactly its text. */
export interface Inlined {
  element: string;
  source: string;
}

/**
 * `body` as an inline element, with its hash. The browser hashes the element's text as its
 * parser produced it, so the text embedded and hashed here is already in that form: the
 * parser turns CR LF and a lone CR into LF (normalized here) and a NUL into U+FFFD (refused:
 * no asset of the page has one), and `</script` or `</style` would end the element early
 * (refused).
 */
export function inline(tag: 'script' | 'style', body: string): Inlined {
  const text = body.replace(/\r\n?/g, '\n');
  if (new RegExp(`</${tag}`, 'i').test(text)) throw new PglogError('INPUT_UNREADABLE', `an inlined ${tag} contains </${tag}`);
  if (text.includes('\u0000')) throw new PglogError('INPUT_UNREADABLE', `an inlined ${tag} contains a NUL character`);
  const hash = createHash('sha256').update(text, 'utf8').digest('base64');
  return { element: `<${tag}>${text}</${tag}>`, source: `'sha256-${hash}'` };
}

function sources(elements: readonly Inlined[]): string {
  return elements.length === 0 ? "'none'" : elements.map((e) => e.source).join(' ');
}

/**
 * The policy for a page whose only scripts and styles are `scripts` and `styles`. Styles are
 * allowed by hash too: the page's markup has no style="" attribute, and uPlot sizes and colors
 * its elements through the CSSOM (`el.style.width = ...`), which style-src does not govern.
 * The JSON data block (`<script type="application/json">`) is never run and needs no hash.
 */
export function contentSecurityPolicy(scripts: readonly Inlined[], styles: readonly Inlined[]): string {
  return [
    "default-src 'none'",
    `script-src ${sources(scripts)}`,
    `style-src ${sources(styles)}`,
    'img-src data:',
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}
