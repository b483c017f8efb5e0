import type { FC } from 'hono/jsx';
import { Layout } from './layout.tsx';

// The login and error pages, and what every logged-in page shares; the overview and a job's page
// are overview-page.tsx and job-page.tsx.

/** The leader lease as the top bar and the overview show it. */
export interface Lease {
  holder: string | null;
  generation: number;
  acquiredAt: Date | null;
  expiresAt: Date | null;
}

export const Csrf: FC<{ token: string }> = ({ token }) => <input type="hidden" name="_csrf" value={token} />;

export const TopBar: FC<{ csrf: string; lease: Lease; now: Date }> = ({ csrf, lease, now }) => (
  <header class="top">
    <a href="/">starbase-worker</a>
    <nav>
      <a href="/dashboard/jobs">Jobs</a>
      <a href="/dashboard/schedules">Schedules</a>
      <a href="/dashboard/history">Over time</a>
      <a href="/dashboard/flow">Flow control</a>
      <a href="/dashboard/dead-letters">Dead letters</a>
      <a href="/dashboard/bulk">Bulk</a>
    </nav>
    <span class="lease">
      leader {lease.holder ?? 'none'} · generation {lease.generation}
      {lease.expiresAt && lease.expiresAt.getTime() < now.getTime() ? ' · expired' : ''}
    </span>
    <form method="post" action="/dashboard/logout">
      <Csrf token={csrf} />
      <button type="submit">Log out</button>
    </form>
    <form method="post" action="/dashboard/logout-everywhere">
      <Csrf token={csrf} />
      <button type="submit" title="End every dashboard session, on every browser">Log out everywhere</button>
    </form>
  </header>
);

export const LoginPage: FC<{ next: string; error?: string; notice?: string }> = ({ next, error, notice }) => (
  <Layout title="Log in">
    <form class="login" method="post" action="/dashboard/login">
      <h1>starbase-worker</h1>
      <p class="muted">The operator dashboard. Log in with the admin token (ADMIN_TOKEN; `npm start` prints its dev token).</p>
      {notice ? <div class="notice" role="status">{notice}</div> : null}
      {error ? <div class="error" role="alert">{error}</div> : null}
      <label for="token">Admin token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      <input type="hidden" name="next" value={next} />
      <button class="primary" type="submit">Log in</button>
    </form>
  </Layout>
);

export const ErrorPage: FC<{ status: number; message: string }> = ({ status, message }) => (
  <Layout title={`Error ${status}`}>
    <h1>{status === 404 ? 'Not found' : `Error ${status}`}</h1>
    <div class="error" role="alert">{message}</div>
    <p><a href="/">Back to the overview</a></p>
  </Layout>
);
