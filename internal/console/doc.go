// Package console is ledgerq's operator console, served under /ui by the
// HTTP API (package httpapi mounts it): server-rendered pages from
// html/template with a little JavaScript, every asset embedded in the
// binary.
//
// It answers "where is my item and why is it waiting" for the three lanes:
// an overview (live counts per lane, what ended per minute over the last
// hour, health), drill-down pages for a batch, a service, a wallet and its
// tasks, a task's attempts, a sender's pool transactions, a bundle, webhook
// endpoints and their deliveries, and the audit. Its few actions (cancel a
// waiting task, send a given-up webhook delivery again, hold and release a
// wallet) go through the same store methods as the API, confirmed on a page
// of their own, and are recorded in the audit in the same transaction.
//
// Access is the API's model (httpapi's access.go): an operator logs in with
// an API key, and the console keeps a server-side session (store's
// console_sessions) in an HttpOnly, SameSite=Strict cookie, Secure over TLS.
// Pages need the read scope, actions admin; every POST carries a CSRF token
// tied to the session. Revoking the key ends its sessions. With
// --api-insecure-open the console acts as an anonymous admin, as the API does.
package console
