// A state's delete section, offered to a role that may delete: what deleting does (the state
// is kept for the retention, for an admin to restore), and the confirmation that stays
// disabled until the state's name is typed.

import { useState } from 'preact/hooks';

import { Confirm, TypedName } from '../../components';
import type { Confirmation } from './actions';

export function DeleteSection(props: { onDelete: () => void }) {
  return (
    <section aria-labelledby="danger-title" class="danger-zone">
      <h2 id="danger-title">Delete</h2>
      <p>
        Deleting the state frees its name at once; every version is kept as a deleted state for the server's retention,
        during which an admin can restore it from the Deleted states page.
      </p>
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
        {name} goes from the list with its {versions} {versions === 1 ? 'version' : 'versions'}, and its name is free
        at once. It is kept as a deleted state for the server's retention (7 days unless set): until then an admin can
        restore it from the Deleted states page.
      </p>
      <TypedName value={typed} onInput={setTyped} />
    </Confirm>
  );
}
