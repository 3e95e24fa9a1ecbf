/**
 * Parses a JSDoc block (`/** ... *\/`) into its description and tags, from the raw comment
 * text. The TypeScript compiler's own tag parser is not used: it reads known tag names
 * (`@enum`, `@type`) as type expressions and drops words (`@enum a b` comes back as `b`).
 */

export interface DocTag {
  /** Tag name without `@`. */
  readonly name: string;
  /** Text after the name, continuation lines joined with a space, trimmed. */
  readonly text: string;
}

export interface DocComment {
  /** Text before the first tag; lines of a paragraph joined with a space, paragraphs with a blank line. */
  readonly description: string;
  readonly tags: readonly DocTag[];
}

const EMPTY: DocComment = { description: '', tags: [] };

/** Lines of the comment body: delimiters and each line's leading ` * ` removed. */
function bodyLines(comment: string): string[] {
  const inner = comment.replace(/^\/\*\*/, '').replace(/\*\/$/, '');
  return inner.split('\n').map((line) => line.replace(/^\s*\*(?!\/) ?/, '').trimEnd());
}

/** Joins the lines of each paragraph with a space, the paragraphs with a blank line. */
export function joinParagraphs(lines: readonly string[]): string {
  const paragraphs: string[] = [];
  let current: string[] = [];
  for (const line of lines) {
    if (line.trim() === '') {
      if (current.length > 0) paragraphs.push(current.join(' '));
      current = [];
    } else {
      current.push(line.trim());
    }
  }
  if (current.length > 0) paragraphs.push(current.join(' '));
  return paragraphs.join('\n\n');
}

export function parseDocComment(comment: string | undefined): DocComment {
  if (comment === undefined) return EMPTY;
  const description: string[] = [];
  const tags: { name: string; lines: string[] }[] = [];
  for (const line of bodyLines(comment)) {
    const tag = /^\s*@([A-Za-z]+)(?![A-Za-z])\s*(\S.*)?$/.exec(line);
    if (tag !== null) tags.push({ name: tag[1] ?? '', lines: [tag[2] ?? ''] });
    else if (tags.length > 0) tags[tags.length - 1]?.lines.push(line);
    else description.push(line);
  }
  return {
    description: joinParagraphs(description),
    tags: tags.map((t) => ({
      name: t.name,
      text: t.lines
        .map((l) => l.trim())
        .filter((l) => l !== '')
        .join(' '),
    })),
  };
}
