// The HTML report's Content-Security-Policy (security review R11): the page rendered with its
// real assets (uPlot and client.js) allows exactly its own inline scripts and styles, each by
// the sha256 of its text as embedded, never 'unsafe-inline'; base-uri and form-action are
// 'none'. The hashes are recomputed here from the page itself, as a browser does.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';

import { loadAssets } from '../../../src/report/html/assets.ts';
import { contentSecurityPolicy, inline } from '../../../src/report/html/csp.ts';
import { renderHtml } from '../../../src/report/html/render.ts';
import { hostileHtmlReport } from '../../helpers/html-report-model.ts';

const HOSTILE = `</script><script>alert(1)</script><style>*{}</style><img src=x style="x" onerror=alert(2)>`;

const sha256 = (text: string): string => `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;

/** The policy of the page's meta element, by directive. */
function policy(html: string): Map<string, string[]> {
  const m = /<meta http-equiv="Content-Security-Policy" content="([^"]*)">/.exec(html);
  assert.ok(m !== null, 'the page has a CSP meta element');
  const csp = m[1] ?? '';
  return new Map(
    csp.split(';').map((d) => {
      const [name = '', ...values] = d.trim().split(/\s+/);
      return [name, values];
    }),
  );
}

/** The text of each element `<tag ...>text</tag>` of the page, with its attributes. */
function elements(html: string, tag: 'script' | 'style'): Array<{ attrs: string; text: string }> {
  return [...html.matchAll(new RegExp(`<${tag}([^>]*)>(.*?)</${tag}>`, 'gs'))].map((m) => ({ attrs: m[1] ?? '', text: m[2] ?? '' }));
}

test('the CSP allows exactly the inline scripts and styles of the page, by sha256, and restricts base-uri and form-action', async () => {
  const html = renderHtml(hostileHtmlReport(HOSTILE), await loadAssets());
  const csp = policy(html);
  assert.deepEqual(csp.get('default-src'), ["'none'"]);
  assert.deepEqual(csp.get('img-src'), ['data:']);
  assert.deepEqual(csp.get('base-uri'), ["'none'"]);
  assert.deepEqual(csp.get('form-action'), ["'none'"]);
  for (const [directive, values] of csp) assert.ok(!values.includes("'unsafe-inline'"), `${directive} has no 'unsafe-inline'`);

  const scripts = elements(html, 'script');
  const run = scripts.filter((s) => !s.attrs.includes('type="application/json"'));
  assert.equal(run.length, 2, 'uPlot and client.js');
  assert.equal(scripts.length - run.length, 1, 'the data block, which is never run');
  assert.ok(
    run.every((s) => s.attrs === ''),
    'inline scripts have no attributes',
  );
  assert.deepEqual(
    csp.get('script-src'),
    run.map((s) => sha256(s.text)),
  );

  const styles = elements(html, 'style');
  assert.equal(styles.length, 2, "uPlot's styles and the page's");
  assert.deepEqual(
    csp.get('style-src'),
    styles.map((s) => sha256(s.text)),
  );

  // Hashed styles hold only while no element carries a style attribute (markup outside the
  // inline scripts and styles; hostile text is escaped, so it adds no tag).
  const markup = html.replace(/<(script|style)[^>]*>.*?<\/\1>/gs, '');
  const tags = [...markup.matchAll(/<[a-z][^>]*>/gi)].map((m) => m[0]);
  assert.ok(tags.length > 100);
  assert.deepEqual(
    tags.filter((t) => /\sstyle\s*=/i.test(t)),
    [],
  );
});

test('inline: the hash is of the text as a browser parses it (CR LF as LF); </script>, </style> and NUL refused', () => {
  assert.equal(inline('script', '').source, "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='");
  const crlf = inline('script', 'a();\r\nb();\rc();');
  assert.equal(crlf.element, '<script>a();\nb();\nc();</script>');
  assert.equal(crlf.source, sha256('a();\nb();\nc();'));
  for (const [tag, body] of [
    ['script', 'x</SCRIPT>'],
    ['style', 'x</style'],
    ['script', 'a\u0000b'],
  ] as const) {
    assert.throws(
      () => inline(tag, body),
      (e) => isPglogError(e),
    );
  }
  assert.equal(contentSecurityPolicy([], []), "default-src 'none'; script-src 'none'; style-src 'none'; img-src data:; base-uri 'none'; form-action 'none'");
});
