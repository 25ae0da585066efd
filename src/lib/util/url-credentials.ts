/**
 * A URL's user and password, percent-decoded as HTTP basic authentication sends them; null
 * when it has none; undefined when one holds a stray % (not %XX), which no client can
 * decode (Node's http.request throws URIError on it): a URL a person mistyped.
 */
export function urlCredentials(url: URL): {user: string; password: string} | null | undefined {
  if (url.username === '' && url.password === '') return null
  try {
    return {user: decodeURIComponent(url.username), password: decodeURIComponent(url.password)}
  } catch {
    return undefined
  }
}

/** What to say of such a URL, after naming it. */
export const STRAY_PERCENT = 'its user or password is not percent-encoded (a % must start %XX: write % as %25)'
