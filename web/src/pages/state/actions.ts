// The state page's actions: which confirmation is open, its error and the busy flag while
// one runs, the notice once one is done, and the calls themselves (roll back, force unlock,
// delete, download). It renders nothing: each dialog sits with its section.

import { useState } from 'preact/hooks';

import { api, fetchContent, seg } from '../../api';
import { save } from '../../components';
import { navigate } from '../../router';
import type { StateView, Version } from '../../types';

export type Dialog = { kind: 'rollback'; version: Version } | { kind: 'unlock' } | { kind: 'delete' } | null;

/** What a confirmation dialog gets from the actions: the busy flag, the error, its two buttons. */
export interface Confirmation {
  busy: boolean;
  error: string | null;
  onConfirm: () => void;
  onCancel: () => void;
}

export interface StateActions {
  dialog: Dialog;
  open: (dialog: Dialog) => void;
  close: () => void;
  /** The open dialog's part, confirmed by `action`. */
  confirm: (action: () => void) => Confirmation;
  /** What the last action did, once done. */
  notice: string | null;
  /** Why the last download failed. */
  failed: string | null;
  rollback: (v: Version) => void;
  unlock: () => void;
  remove: () => void;
  download: (v: Version) => void;
}

/** The actions on the state `name`; `reload` reads the state again after one changed it. */
export function useStateActions(name: string, state: StateView | null, reload: () => Promise<void>): StateActions {
  const [dialog, setDialog] = useState<Dialog>(null);
  const [dialogError, setDialogError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const path = `/api/tf-states/${seg(name)}`;

  const close = () => {
    setDialog(null);
    setDialogError(null);
  };
  const act = async (work: () => Promise<string>) => {
    setBusy(true);
    setDialogError(null);
    try {
      const done = await work();
      close();
      setNotice(done);
      await reload();
    } catch (e) {
      setDialogError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  // An action after which nothing of the state is left to show: back to the list.
  const leave = async (work: () => Promise<unknown>) => {
    setBusy(true);
    try {
      await work();
      navigate('/states', true);
    } catch (e) {
      setDialogError((e as Error).message);
      setBusy(false);
    }
  };

  return {
    dialog,
    open: setDialog,
    close,
    confirm: (action) => ({ busy, error: dialogError, onConfirm: action, onCancel: close }),
    notice,
    failed,
    rollback: (v) =>
      act(async () => {
        const made = await api<Version>('POST', `${path}/rollback`, { version: v.version });
        return `Rolled back: version ${made.version} has the content of version ${v.version}, serial ${made.serial}.`;
      }),
    unlock: () =>
      state?.latest_version !== null
        ? act(async () => {
            await api('POST', `${path}/force-unlock`);
            return 'Force-unlocked: the state is free.';
          })
        : // A state with no version yet is only its hold: nothing of it is left to show.
          leave(() => api('POST', `${path}/force-unlock`)),
    remove: () => leave(() => api('DELETE', path)),
    download: async (v) => {
      try {
        save(await fetchContent(`${path}/versions/${v.version}/content`), `${name}-v${v.version}.tfstate`);
      } catch (e) {
        setFailed((e as Error).message);
      }
    },
  };
}
