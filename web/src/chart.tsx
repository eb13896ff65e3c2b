// Charts: the size of each version over time, as a small line chart (growth or a sudden
// drop shows at a glance), and counts as horizontal bars (the overview's resources by
// provider and by type). SVG attributes only (the CSP allows no inline style); what a chart
// shows is also written as text (the line's ends in its caption, each bar's label and count
// in a table), so it reads without colour and to a screen reader.

import type { ComponentChildren } from 'preact';

import { bytes } from './format';
import type { Version } from './types';

const W = 640;
const H = 120;
const PAD = 8;

/** The chart's points for `versions` (any order), oldest first, scaled to the chart. */
export function points(versions: Pick<Version, 'version' | 'size'>[]): [number, number][] {
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  const max = Math.max(1, ...sorted.map((v) => v.size));
  const step = sorted.length > 1 ? (W - 2 * PAD) / (sorted.length - 1) : 0;
  return sorted.map((v, i) => [
    Math.round(PAD + i * step),
    Math.round(H - PAD - (v.size / max) * (H - 2 * PAD)),
  ]);
}

export function SizeChart(props: { versions: Version[] }) {
  const { versions } = props;
  if (versions.length < 2) return null;
  const pts = points(versions);
  const sorted = [...versions].sort((a, b) => a.version - b.version);
  const first = sorted[0];
  const last = sorted[sorted.length - 1];
  const summary = `Size per version, from ${bytes(first.size)} at version ${first.version} to ${bytes(last.size)} at version ${last.version}`;
  return (
    <figure class="chart">
      <svg viewBox={`0 0 ${W} ${H}`} role="img" aria-label={summary} preserveAspectRatio="none">
        <polyline points={pts.map((p) => p.join(',')).join(' ')} fill="none" stroke="#3b4cca" stroke-width="2" />
        {pts.map(([x, y], i) => (
          <circle cx={x} cy={y} r="3" fill="#3b4cca">
            <title>{`version ${sorted[i].version}: ${bytes(sorted[i].size)}`}</title>
          </circle>
        ))}
      </svg>
      <figcaption>{summary}</figcaption>
    </figure>
  );
}

/**
 * A bar's length in percent of the longest, `count` of `max`: at least 1 for any count above
 * zero, so a type with one instance beside one with thousands still shows a bar.
 */
export function barLength(count: number, max: number): number {
  if (count <= 0 || max <= 0) return 0;
  return Math.min(100, Math.max(1, Math.round((count / max) * 100)));
}

/** One bar: its label (text, or a link), its count, and a key for the list. */
export interface Bar {
  key: string;
  label: ComponentChildren;
  count: number;
}

/**
 * Counts as horizontal bars: a table (label, count, bar), so the label and number are text a
 * screen reader reads row by row and the bar, hidden from it, only repeats the number in length.
 */
export function BarChart(props: { title: string; labelHeading: string; countHeading: string; bars: Bar[] }) {
  const max = Math.max(0, ...props.bars.map((b) => b.count));
  return (
    <table class="bars">
      <caption>{props.title}</caption>
      <thead>
        <tr>
          <th scope="col">{props.labelHeading}</th>
          <th scope="col" class="count">
            {props.countHeading}
          </th>
          <td aria-hidden="true" />
        </tr>
      </thead>
      <tbody>
        {props.bars.map((b) => (
          <tr key={b.key}>
            <th scope="row">{b.label}</th>
            <td class="count">{b.count}</td>
            <td class="bar" aria-hidden="true">
              <svg viewBox="0 0 100 10" preserveAspectRatio="none" focusable="false">
                <rect x="0" y="0" width={barLength(b.count, max)} height="10" fill="#3b4cca" />
              </svg>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
