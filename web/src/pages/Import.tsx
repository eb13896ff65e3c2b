// Import state: pick or drop a state file, name the new state (checked against the naming
// rule as one types), upload it with a progress bar, and land on its page.

import { useState } from 'preact/hooks';

import { ApiError, seg, upload } from '../api';
import { ErrorText } from '../components';
import { bytes } from '../format';
import { nameFromFile, nameProblem } from '../names';
import { navigate } from '../router';
import type { Identity, Version } from '../types';

/** The server's refusal of an import, in words. */
export function importRefusal(e: ApiError, name: string): string {
  switch (e.code) {
    case 'state_exists':
      return `A state named ${name} already exists: choose another name (an import only creates a new state).`;
    case 'not_a_state':
      return `This file is not a Terraform or OpenTofu state document: ${e.message}.`;
    case 'too_large': {
      const limit = /limit of (\d+) bytes/.exec(e.message);
      return limit
        ? `This file is larger than the server's limit of ${bytes(Number(limit[1]))} (HEGEMONY_TF_STATE_MAX_BYTES).`
        : `This file is too large: ${e.message}.`;
    }
    case 'invalid_name':
      return `The name is refused: ${e.message}.`;
    case 'locked':
      return `A state of that name is locked: ${e.message}.`;
    default:
      return e.message;
  }
}

export function ImportPage(props: { me: Identity }) {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const [sent, setSent] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [dragging, setDragging] = useState(false);
  const problem = name === '' && !file ? null : nameProblem(name);

  if (!props.me.allowed_actions.import) {
    return (
      <>
        <h1>Import state</h1>
        <p class="reason">Importing needs tf_state:write, which your role ({props.me.role}) does not have.</p>
      </>
    );
  }

  const pick = (picked: File | undefined) => {
    if (!picked) return;
    setFile(picked);
    setName(nameFromFile(picked.name));
    setError(null);
    setSent(null);
  };
  const submit = async (e: Event) => {
    e.preventDefault();
    if (!file || problem) return;
    setError(null);
    setSent(0);
    try {
      await upload<Version>(`/api/tf-states/${seg(name)}/import`, file, (n) => setSent(n));
      navigate(`/states/${encodeURIComponent(name)}?imported=1`);
    } catch (err) {
      setSent(null);
      setError(err instanceof ApiError ? importRefusal(err, name) : (err as Error).message);
    }
  };

  return (
    <>
      <h1>Import state</h1>
      <p>
        Creates a new state from a state file (<code>terraform.tfstate</code>, or the output of{' '}
        <code>terraform state pull</code>), keeping its serial and lineage.
      </p>
      <form onSubmit={submit} class="import">
        <div
          class={dragging ? 'drop dragging' : 'drop'}
          onDragOver={(e) => {
            e.preventDefault();
            setDragging(true);
          }}
          onDragLeave={() => setDragging(false)}
          onDrop={(e) => {
            e.preventDefault();
            setDragging(false);
            pick(e.dataTransfer?.files[0]);
          }}
        >
          <label for="file">State file (or drop it here)</label>
          <input
            id="file"
            type="file"
            accept=".tfstate,.json,application/json"
            onChange={(e) => pick((e.target as HTMLInputElement).files?.[0])}
          />
          {file && (
            <p class="muted">
              {file.name}, {bytes(file.size)}
            </p>
          )}
        </div>
        <label for="name">Name of the new state</label>
        <input
          id="name"
          value={name}
          autoComplete="off"
          spellcheck={false}
          aria-invalid={problem ? 'true' : 'false'}
          aria-describedby="name-rule"
          onInput={(e) => setName((e.target as HTMLInputElement).value)}
        />
        <p id="name-rule" class={problem ? 'error' : 'muted'}>
          {problem ?? "1 to 128 of A-Z, a-z, 0-9, '.', '_' and '-', not starting with '.'."}
        </p>
        {sent !== null && file && (
          <div class="progress">
            <label for="progress">Uploading</label>
            <progress id="progress" max={file.size} value={sent} />
            <span class="muted">
              {bytes(sent)} of {bytes(file.size)}
            </span>
          </div>
        )}
        <ErrorText error={error} />
        <button type="submit" disabled={!file || problem !== null || sent !== null}>
          Import
        </button>
      </form>
    </>
  );
}
