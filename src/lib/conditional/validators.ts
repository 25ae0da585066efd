/** What a server said identifies a file's version: sent back as If-None-Match and If-Modified-Since. */
export interface Validators {
  etag?: string
  lastModified?: string
}

/** A conditional read's answer: the copy kept is still the file (304), or the file as read now with its validators. */
export type ConditionalRead = {status: 'unchanged'} | {status: 'read'; bytes: Buffer; validators: Validators}
