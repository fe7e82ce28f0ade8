module gc.stream.space/client

go 1.22
