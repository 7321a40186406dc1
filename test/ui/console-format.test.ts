/**
 * The console's formatting (console/src/format.ts), from the newcomer report: durations never
 * read "4 min 60 s", a waiting turn says what for, tool states are words.
 */
import { describe, expect, it } from 'vitest';
import { formatMs, statusText, toolStateText } from '../../console/src/format.js';

describe('first hour: the console says durations, waits and tool states as people read them', () => {
  it('first hour: a duration rounds to whole seconds before it is split into minutes', () => {
    expect(formatMs(299_600)).toBe('5 min 0 s');
    expect(formatMs(59_970)).toBe('1 min 0 s');
    expect(formatMs(59_940)).toBe('59.9 s');
    expect(formatMs(125_400)).toBe('2 min 5 s');
    expect(formatMs(950)).toBe('950 ms');
    expect(formatMs(null)).toBe('running');
  });

  it('first hour: a waiting turn says what it waits for; a tool state is a word', () => {
    expect(statusText('running', 'approval')).toBe('awaiting approval');
    expect(statusText('waiting', 'sub-agents')).toBe('waiting for sub-agents');
    expect(statusText('waiting', null)).toBe('waiting');
    expect(toolStateText('output-available')).toBe('done');
    expect(toolStateText('output-error')).toBe('failed');
    expect(toolStateText('something-new')).toBe('something new');
  });
});
