// A state's delete section, offered to a role that may delete: what deleting does, and the
// confirmation that stays disabled until the state's name is typed.

import { useState } from 'preact/hooks';

import { Confirm } from '../../components';
import type { Confirmation } from './actions';

export function DeleteSection(props: { onDelete: () => void }) {
  return (
    <section aria-labelledby="danger-title" class="danger-zone">
      <h2 id="danger-title">Delete</h2>
      <p>Deleting the state removes every version; its name can then be used again.</p>
      <button type="button" class="danger" onClick={props.onDelete}>
        Delete state
      </button>
    </section>
  );
}

export function DeleteDialog(props: {
  name: string;
  versions: number;
} & Confirmation) {
  const { name, versions } = props;
  // What is typed goes with the dialog: opened again, it starts empty.
  const [typed, setTyped] = useState('');
  return (
    <Confirm
      title={`Delete ${name}?`}
      confirm="Delete state"
      danger
      busy={props.busy}
      error={props.error}
      confirmable={typed === name}
      onConfirm={props.onConfirm}
      onCancel={props.onCancel}
    >
      <p>
        Every version of {name} goes ({versions} {versions === 1 ? 'version' : 'versions'}). This cannot be undone.
      </p>
      <label for="confirm-name">Type the state's name to confirm</label>
      <input
        id="confirm-name"
        value={typed}
        autoComplete="off"
        spellcheck={false}
        onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
      />
    </Confirm>
  );
}
