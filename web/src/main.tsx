// The application: who the token is (GET /api/whoami), the shell every page shares (the
// org, the user and the role; the sidebar; sign out), and the page the path names (the
// org's overview at `/`, where signing in lands).

import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';

import { api, currentToken, forgetToken, whenUnauthenticated } from './api';
import { Link } from './components';
import { actor } from './format';
import { AppsPage } from './pages/Apps';
import { AppStatePage } from './pages/AppState';
import { ArchivePage } from './pages/Archive';
import { AuditPage } from './pages/Audit';
import { ConflictsPage } from './pages/Conflicts';
import { DeletedPage } from './pages/Deleted';
import { ImportPage } from './pages/Import';
import { OverviewPage } from './pages/Overview';
import { PermissionsPage } from './pages/Permissions';
import { ResourcesPage } from './pages/Resources';
import { TrustPoliciesPage } from './pages/TrustPolicies';
import { SignIn } from './pages/SignIn';
import { StatePage } from './pages/State';
import { StatesPage } from './pages/States';
import { navigate, pageOf, useLocation } from './router';
import './style.css';
import type { Identity } from './types';

function App() {
  const location = useLocation();
  const [me, setMe] = useState<Identity | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const page = pageOf(location.pathname);

  useEffect(() => {
    whenUnauthenticated(() => {
      setMe(null);
      navigate('/sign-in', true);
    });
  }, []);

  useEffect(() => {
    if (page.page === 'sign-in') return;
    if (!currentToken()) {
      navigate('/sign-in', true);
      return;
    }
    if (me) return;
    api<Identity>('GET', '/api/whoami')
      .then(setMe)
      .catch((e: Error) => setProblem(e.message));
  }, [page.page, me]);

  useEffect(() => {
    const titles: Record<string, string> = {
      'sign-in': 'Sign in',
      overview: 'Overview',
      states: 'Terraform States',
      resources: 'Resources',
      conflicts: 'Objects managed by two or more states',
      state: page.page === 'state' ? page.name : '',
      import: 'Import state',
      audit: 'Audit log',
      permissions: 'Permissions',
      deleted: 'Deleted states',
      'trust-policies': 'Trust policies',
      apps: 'Octo apps',
      app: page.page === 'app' ? page.name : '',
      archive: page.page === 'archive' ? `${page.commitId} · ${page.name}` : '',
      missing: 'Not found',
    };
    document.title = `${titles[page.page]} · Hegemony State`;
  }, [location.href]);

  if (page.page === 'sign-in') {
    return <SignIn onSignedIn={(identity) => setMe(identity)} />;
  }
  if (!me) {
    return (
      <main class="loading">
        {problem ? (
          <p class="error" role="alert">
            {problem}
          </p>
        ) : (
          <p>Loading…</p>
        )}
      </main>
    );
  }
  const signOut = () => {
    forgetToken();
    setMe(null);
    navigate('/sign-in');
  };
  const here = (p: string) => (page.page === p ? 'page' : undefined);
  // Deleted states need the admin role whatever the allocation: no action flag says it.
  const admin = me.role === 'admin';
  return (
    <div class="shell">
      <header class="top">
        <span class="brand">Hegemony State</span>
        <span class="who" aria-label="Signed in as">
          <span>
            org <strong>{me.org}</strong>
          </span>
          <span>
            user <strong>{actor(me.actor)}</strong>
          </span>
          <span>
            role <strong>{me.role}</strong>
          </span>
        </span>
        <button type="button" class="secondary" onClick={signOut}>
          Sign out
        </button>
      </header>
      <nav class="side" aria-label="Sidebar">
        <ul>
          <li aria-current={here('overview')}>
            <Link href="/">Overview</Link>
          </li>
        </ul>
        <p class="section">Artifacts</p>
        <ul>
          <li aria-current={here('states') ?? here('state')}>
            <Link href="/states">Terraform States</Link>
          </li>
          <li aria-current={here('resources') ?? here('conflicts')}>
            <Link href="/resources">Resources</Link>
          </li>
          {me.allowed_actions.import && (
            <li aria-current={here('import')}>
              <Link href="/import">Import state</Link>
            </li>
          )}
          <li aria-current={here('apps') ?? here('app') ?? here('archive')}>
            <Link href="/apps">Octo apps</Link>
          </li>
        </ul>
        {(me.allowed_actions.audit || me.allowed_actions.permissions || admin) && (
          <>
            <p class="section">Organization</p>
            <ul>
              {me.allowed_actions.audit && (
                <li aria-current={here('audit')}>
                  <Link href="/audit">Audit log</Link>
                </li>
              )}
              {me.allowed_actions.permissions && (
                <li aria-current={here('permissions')}>
                  <Link href="/permissions">Permissions</Link>
                </li>
              )}
              {admin && (
                <li aria-current={here('deleted')}>
                  <Link href="/deleted-states">Deleted states</Link>
                </li>
              )}
              {admin && (
                <li aria-current={here('trust-policies')}>
                  <Link href="/trust-policies">Trust policies</Link>
                </li>
              )}
            </ul>
          </>
        )}
      </nav>
      <main class="content">
        {page.page === 'overview' && <OverviewPage />}
        {page.page === 'states' && <StatesPage me={me} location={location} />}
        {page.page === 'resources' && <ResourcesPage location={location} />}
        {page.page === 'conflicts' && <ConflictsPage />}
        {page.page === 'state' && <StatePage me={me} name={page.name} location={location} />}
        {page.page === 'import' && <ImportPage me={me} />}
        {page.page === 'audit' && <AuditPage me={me} location={location} />}
        {page.page === 'permissions' && <PermissionsPage me={me} />}
        {page.page === 'deleted' && <DeletedPage me={me} location={location} />}
        {page.page === 'trust-policies' && <TrustPoliciesPage me={me} />}
        {page.page === 'apps' && <AppsPage location={location} />}
        {page.page === 'app' && <AppStatePage name={page.name} location={location} />}
        {page.page === 'archive' && <ArchivePage me={me} name={page.name} commitId={page.commitId} />}
        {page.page === 'missing' && (
          <>
            <h1>Not found</h1>
            <p>
              No page here. <Link href="/">Go to the overview</Link>.
            </p>
          </>
        )}
      </main>
    </div>
  );
}

render(<App />, document.getElementById('app')!);
