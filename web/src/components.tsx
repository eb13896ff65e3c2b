// Small pieces the pages share: links that stay in the application, times with the exact
// value on hover, a copy button, the confirmation dialog, a lock's summary, a download.
// Every value is rendered as text (never as HTML).

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

import { actor, exact, linkable, relative } from './format';
import { navigate } from './router';
import type { HoldView, LockView } from './types';

export function Link(props: { href: string; children: ComponentChildren; class?: string }) {
  const follow = (e: MouseEvent) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(props.href);
  };
  return (
    <a href={props.href} class={props.class} onClick={follow}>
      {props.children}
    </a>
  );
}

/** A time, relative, with the exact time on hover. */
export function Time(props: { at: string | null | undefined }) {
  if (!props.at) return <span>never</span>;
  return (
    <time dateTime={props.at} title={exact(props.at)}>
      {relative(props.at)}
    </time>
  );
}

/** Copies `text` to the clipboard; says so for a moment. */
export function CopyButton(props: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(props.text);
      setDone(true);
      setTimeout(() => setDone(false), 1500);
    } catch {
      setDone(false);
    }
  };
  return (
    <button type="button" class="secondary small" onClick={copy} aria-label={props.label}>
      {done ? 'Copied' : 'Copy'}
    </button>
  );
}

/** A backend.hcl in a block, with its copy button. */
export function Hcl(props: { text: string; label: string }) {
  return (
    <div class="hcl">
      <pre aria-label={props.label} tabIndex={0}>
        {props.text}
      </pre>
      <CopyButton text={props.text} label={`Copy ${props.label}`} />
    </div>
  );
}

/**
 * A modal confirmation: the native dialog, so focus stays inside it and Escape cancels.
 * `confirmable` keeps the confirm button disabled (e.g. until the state's name is typed).
 */
export function Confirm(props: {
  title: string;
  confirm: string;
  danger?: boolean;
  confirmable?: boolean;
  busy?: boolean;
  error?: string | null;
  onConfirm: () => void;
  onCancel: () => void;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog?.close();
  }, []);
  const cancel = (e: Event) => {
    e.preventDefault();
    props.onCancel();
  };
  return (
    <dialog ref={ref} aria-labelledby="dialog-title" onCancel={cancel}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          props.onConfirm();
        }}
      >
        <h2 id="dialog-title">{props.title}</h2>
        {props.children}
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <div class="buttons">
          <button type="button" class="secondary" onClick={props.onCancel}>
            Cancel
          </button>
          <button
            type="submit"
            class={props.danger ? 'danger' : ''}
            disabled={props.confirmable === false || props.busy}
          >
            {props.confirm}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** A run's link when its address is known (and http or https), its id otherwise. */
/** The field a destructive dialog asks the state's name in, so that a slip cannot confirm it. */
export function TypedName(props: { value: string; onInput: (typed: string) => void }) {
  return (
    <>
      <label for="confirm-name">Type the state's name to confirm</label>
      <input
        id="confirm-name"
        value={props.value}
        autoComplete="off"
        spellcheck={false}
        onInput={(e) => props.onInput((e.target as HTMLInputElement).value)}
      />
    </>
  );
}

export function RunLink(props: { run: string; url: string | null | undefined }) {
  const href = linkable(props.url);
  if (!href) return <span>run {props.run}</span>;
  return (
    <a href={href} rel="noreferrer">
      run {props.run}
    </a>
  );
}

/** Who holds a lock, in words, with the run's link for a step. */
export function Holder(props: { lock: LockView }) {
  const h = props.lock.holder;
  if (h.kind === 'step') {
    return (
      <span>
        <RunLink run={h.run} url={h.run_url} /> · step {h.step} · attempt {h.attempt}
      </span>
    );
  }
  return <span>{actor(h)}</span>;
}

/** The lock or hold on a state, in one line for the list. */
export function LockSummary(props: { lock: LockView | null; hold: HoldView | null }) {
  const { lock, hold } = props;
  if (!lock && !hold) return <span class="muted">unlocked</span>;
  return (
    <div class="locks">
      {lock && (
        <div class="lock">
          <span class="badge locked">Locked</span> by <Holder lock={lock} />, <Time at={lock.since} />
          <div class="muted">
            lock ID <code>{lock.id}</code>
            {lock.operation ? ` · ${lock.operation}` : ''}
          </div>
        </div>
      )}
      {hold && (
        <div class="hold">
          <span class="badge held">Held</span> by <RunLink run={hold.run} url={hold.run_url} /> until its apply,{' '}
          <Time at={hold.since} />
        </div>
      )}
    </div>
  );
}

/** An error in words, announced. */
export function ErrorText(props: { error: string | null }) {
  if (!props.error) return null;
  return (
    <p class="error" role="alert">
      {props.error}
    </p>
  );
}

/** Saves `blob` as a file named `name`, as a download. */
export function save(blob: Blob, name: string) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
