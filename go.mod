module github.com/dshfs/dshfs

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/klauspost/compress v1.20.4
	github.com/mattn/go-sqlite3 v1.14.53
	golang.org/x/sys v0.28.0
)

require (
	github.com/jackc/pgx/v5 v5.13.0
	github.com/yuin/goldmark v1.8.7
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	golang.org/x/sync v0.22.0 // indirect
	golang.org/x/text v0.41.0 // indirect
)
