module github.com/dshfs/dshfs

go 1.26.8

require github.com/klauspost/compress v1.20.4
