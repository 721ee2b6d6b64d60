module github.com/dshfs/dshfs

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/compress v1.20.4
	github.com/mattn/go-sqlite3 v1.14.53
	golang.org/x/sys v0.28.0
)

require github.com/yuin/goldmark v1.8.7
