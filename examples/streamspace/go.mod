module gc.stream.space/examples/streamspace

go 1.22

require (
	gc.stream.space/client v0.0.0
	github.com/lib/pq v1.10.9
)

replace gc.stream.space/client => ../../clients/go
