/**
 * Issue 45: docs/decisions is the decision record, one file per decision, each listed once in
 * its index (docs/decisions/README.md), so a new decision is a new file and one index line.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const dir = resolve(import.meta.dirname, '../../docs/decisions');
const files = readdirSync(dir).filter((name) => name !== 'README.md');
const index = readFileSync(join(dir, 'README.md'), 'utf8');

describe('first hour: the decision record', () => {
  it('first hour: every decision file is NNN-slug.md with a "# NNN. Title" heading, numbers unique', () => {
    const numbers = files.map((name) => {
      const match = /^(\d{3})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$/.exec(name);
      expect(match, name).not.toBeNull();
      const heading = readFileSync(join(dir, name), 'utf8').split('\n')[0]!;
      expect(heading, name).toMatch(new RegExp(`^# ${match![1]}\\. \\S`));
      return match![1];
    });
    expect(new Set(numbers).size).toBe(numbers.length);
    expect(numbers.length).toBeGreaterThanOrEqual(51);
  });

  it('first hour: the index lists every decision file once, in number order, and nothing else', () => {
    const listed = [...index.matchAll(/^- \[(\d{3})\. [^\]]+\]\((\d{3}-[^)]+\.md)\): \S/gm)];
    expect(listed.map((m) => m[2])).toEqual([...files].sort());
    for (const [, number, file] of listed) expect(file!.startsWith(`${number}-`), file).toBe(true);
  });
});
