// A state's lock section: the lock in full (holder, ID, Terraform's fields, since when, until
// when it lives) or a run's hold, the force unlock button and its confirmation, and why roll
// back and delete are not offered while the state is locked or held.

import { Confirm, Holder, RunLink, Time } from '../../components';
import { exact } from '../../format';
import type { Identity, StateView } from '../../types';
import type { Confirmation } from './actions';

export function LockSection(props: { me: Identity; state: StateView; onForceUnlock: () => void }) {
  const { me, state } = props;
  const held = state.lock !== null || state.hold !== null;
  const blocked =
    held && (me.allowed_actions.rollback || me.allowed_actions.delete)
      ? `Roll back and delete are not offered while the state is ${state.lock ? 'locked' : 'held by a run'}${
          me.allowed_actions.force_unlock ? ': force unlock it first, or wait for its holder' : ': wait for its holder to finish'
        }.`
      : null;
  return (
    <section aria-labelledby="lock-title">
      <h2 id="lock-title">Lock</h2>
      {!held && <p>Unlocked.</p>}
      {state.lock && (
        <dl class="facts lock-detail">
          <dt>Holder</dt>
          <dd>
            <Holder lock={state.lock} />
          </dd>
          <dt>Lock ID</dt>
          <dd>
            <code>{state.lock.id}</code>
          </dd>
          <dt>Operation</dt>
          <dd>{state.lock.operation ?? ''}</dd>
          <dt>Who</dt>
          <dd>{state.lock.who ?? ''}</dd>
          <dt>Info</dt>
          <dd>{state.lock.info ?? ''}</dd>
          <dt>Created</dt>
          <dd>{state.lock.created ?? ''}</dd>
          <dt>Since</dt>
          <dd>
            <Time at={state.lock.since} /> ({exact(state.lock.since)})
          </dd>
          {state.lock.live_until && (
            <>
              <dt>Live until</dt>
              <dd>
                <Time at={state.lock.live_until} /> ({exact(state.lock.live_until)})
              </dd>
            </>
          )}
        </dl>
      )}
      {state.hold && (
        <p>
          Held by <RunLink run={state.hold.run} url={state.hold.run_url} /> until its apply, since{' '}
          <Time at={state.hold.since} /> (hold ID <code>{state.hold.id}</code>).
        </p>
      )}
      {state.allowed_actions.force_unlock && (
        <button type="button" class="danger" onClick={props.onForceUnlock}>
          Force unlock
        </button>
      )}
      {blocked && <p class="reason">{blocked}</p>}
    </section>
  );
}

/** The force unlock confirmation: who holds the state, and what ending their lock or hold does. */
export function UnlockDialog(props: {
  name: string;
  state: StateView;
} & Confirmation) {
  const { state } = props;
  return (
    <Confirm
      title={`Force unlock ${props.name}?`}
      confirm="Force unlock"
      danger
      busy={props.busy}
      error={props.error}
      onConfirm={props.onConfirm}
      onCancel={props.onCancel}
    >
      {state.lock && (
        <p>
          The lock is held by <Holder lock={state.lock} /> (lock ID <code>{state.lock.id}</code>
          {state.lock.who ? `, ${state.lock.who}` : ''}) since <Time at={state.lock.since} />. If it is still working,
          its next save is refused.
        </p>
      )}
      {state.hold && (
        <p>
          The state is held by <RunLink run={state.hold.run} url={state.hold.run_url} /> until its apply.
        </p>
      )}
      <p>
        This also ends a run's hold on the state: that run's apply then refuses its plan if the state changed in the
        meantime.
      </p>
    </Confirm>
  );
}
