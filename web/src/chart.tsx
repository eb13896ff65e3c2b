// The size of each version over time, as a small line chart: growth or a sudden drop shows
// at a glance. SVG attributes only (the CSP allows no inline style).

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
