/**
 * Markdown from a model, shown as React elements: headings, paragraphs, lists, quotes, fenced
 * code, inline code, bold, italic and links. Every piece of text is a React text node, so HTML
 * in the output is shown as text, never parsed; a link is live only when it is http(s).
 */
import type { ReactNode } from 'react';

const INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))/g;

function inline(text: string): ReactNode[] {
  const nodes: ReactNode[] = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    const [token] = match;
    const at = match.index;
    if (at > last) nodes.push(text.slice(last, at));
    const key = nodes.length;
    if (match[1]) nodes.push(<code key={key}>{token.slice(1, -1)}</code>);
    else if (match[2]) nodes.push(<strong key={key}>{inline(token.slice(2, -2))}</strong>);
    else if (match[3]) nodes.push(<em key={key}>{inline(token.slice(1, -1))}</em>);
    else {
      const label = token.slice(1, token.indexOf(']('));
      const url = token.slice(token.indexOf('](') + 2, -1);
      nodes.push(
        /^https?:\/\//i.test(url) ? (
          <a key={key} href={url} target="_blank" rel="noreferrer noopener nofollow">
            {inline(label)}
          </a>
        ) : (
          <span key={key}>{token}</span>
        ),
      );
    }
    last = at + token.length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

type Block =
  | { kind: 'heading'; level: number; text: string }
  | { kind: 'code'; text: string }
  | { kind: 'list'; ordered: boolean; items: string[] }
  | { kind: 'quote'; text: string }
  | { kind: 'paragraph'; text: string };

function blocks(source: string): Block[] {
  const lines = source.replace(/\r\n?/g, '\n').split('\n');
  const out: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    if (line.trim() === '') {
      i += 1;
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      out.push({ kind: 'heading', level: heading[1]!.length, text: heading[2]! });
      i += 1;
      continue;
    }
    if (/^\s*(```|~~~)/.test(line)) {
      const fence = line.trim().slice(0, 3);
      const body: string[] = [];
      i += 1;
      while (i < lines.length && !lines[i]!.trim().startsWith(fence)) body.push(lines[i++]!);
      i += 1;
      out.push({ kind: 'code', text: body.join('\n') });
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const items: string[] = [];
      while (i < lines.length && item.test(lines[i]!)) items.push(lines[i++]!.replace(item, ''));
      out.push({ kind: 'list', ordered, items });
      continue;
    }
    if (line.startsWith('>')) {
      const body: string[] = [];
      while (i < lines.length && lines[i]!.startsWith('>')) body.push(lines[i++]!.replace(/^>\s?/, ''));
      out.push({ kind: 'quote', text: body.join(' ') });
      continue;
    }
    const body: string[] = [];
    while (i < lines.length && lines[i]!.trim() !== '' && !/^(#{1,6}\s|\s*(```|~~~)|>)/.test(lines[i]!))
      body.push(lines[i++]!);
    out.push({ kind: 'paragraph', text: body.join(' ') });
  }
  return out;
}

export function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      {blocks(text).map((block, key) => {
        switch (block.kind) {
          case 'heading': {
            // The page's own headings are h1–h2: the output's start at h3.
            const Tag = `h${Math.min(6, block.level + 2)}` as 'h3';
            return <Tag key={key}>{inline(block.text)}</Tag>;
          }
          case 'code':
            return (
              <pre key={key} className="code">
                {block.text}
              </pre>
            );
          case 'list': {
            const Tag = block.ordered ? 'ol' : 'ul';
            return (
              <Tag key={key}>
                {block.items.map((item, n) => (
                  <li key={n}>{inline(item)}</li>
                ))}
              </Tag>
            );
          }
          case 'quote':
            return <blockquote key={key}>{inline(block.text)}</blockquote>;
          case 'paragraph':
            return <p key={key}>{inline(block.text)}</p>;
        }
      })}
    </div>
  );
}
