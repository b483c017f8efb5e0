import { TOKENS, type WorkerHarness } from './support.ts';

export const ORIGIN = 'http://worker.test';

export interface PageInit {
  method?: string;
  form?: Record<string, string>;
  /** null: no Origin header on a post (our origin otherwise). */
  origin?: string | null;
  /** The session cookie to send (the browser's own by default); null: none. */
  cookie?: string | null;
}

export interface PageAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/**
 * A browser on the dashboard, over a Worker harness: it keeps the session cookie and the page's
 * CSRF token, sends our Origin on posts, and posts forms as a browser does.
 */
export function dashboardBrowser(harness: () => WorkerHarness) {
  const browser = {
    cookie: '',
    csrf: '',
    async page(path: string, init: PageInit = {}): Promise<PageAnswer> {
      const headers: Record<string, string> = {};
      const jar = init.cookie === undefined ? browser.cookie : init.cookie;
      if (jar) headers.cookie = `__Host-starbase_session=${jar}`;
      if (init.form) headers['content-type'] = 'application/x-www-form-urlencoded';
      if (init.method === 'POST' && init.origin !== null) headers.origin = init.origin ?? ORIGIN;
      const body = init.form ? new URLSearchParams(init.form).toString() : undefined;
      const res = await harness().request(path, { method: init.method ?? 'GET', token: null, headers, body });
      return { status: res.status, headers: res.headers, text: await res.text() };
    },
    /** A form post with the page's CSRF token (a `_csrf` in `form` replaces it). */
    post(path: string, form: Record<string, string> = {}, init: Omit<PageInit, 'method' | 'form'> = {}): Promise<PageAnswer> {
      return browser.page(path, { method: 'POST', form: { _csrf: browser.csrf, ...form }, ...init });
    },
    login(token: string = TOKENS.admin): Promise<PageAnswer> {
      return browser.page('/dashboard/login', { method: 'POST', form: { token, next: '/' }, cookie: null });
    },
    /** Logs in and keeps the session's cookie and CSRF token (read from a page, as a browser has it). */
    async signIn(): Promise<void> {
      const res = await browser.login();
      browser.cookie = /^__Host-starbase_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')![1]!;
      browser.csrf = /name="_csrf" value="([A-Za-z0-9_-]{43})"/.exec((await browser.page('/dashboard/jobs')).text)![1]!;
    },
  };
  return browser;
}
