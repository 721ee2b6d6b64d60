// Package viewcache keeps what the mount has decoded and rendered: decoded sessions and rendered views in
// byte-bounded LRUs, keyed by a typed (session, view, revision), and optionally the persistent
// per-revision index behind them. It knows nothing of FUSE: package nodes serves what it returns.
package viewcache
