module gpuaccept

go 1.26.8

require (
	github.com/kevinburke/ssh_config v1.6.0
	github.com/pkg/sftp v1.13.12
	github.com/skeema/knownhosts v1.3.3
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.59.0
)

require (
	github.com/kr/fs v0.1.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
)
