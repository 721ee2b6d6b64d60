package generation_test

import (
	"errors"
	"fmt"

	"github.com/dshfs/dshfs/eventstore/generation"
)

// A session.v3.jsonl artifact: the header line, then one event per line; the last line was cut short
// by a crash and is not part of the session.
func ExampleDecode() {
	artifact := []byte(`{"type":"session","version":3,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}
{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}
{"type":"turn/end","seq":1,"time":11,"data":{"turn":1,"reason":{"kind":"completed"}}}
{"type":"turn/st`)
	a, err := generation.Decode(3, false, artifact)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s", a.AppendRestored(nil))

	// the same bytes under a v2 file name are refused
	_, err = generation.Decode(2, false, artifact)
	var mismatch *generation.MismatchError
	fmt.Println(errors.As(err, &mismatch), err)
	// Output:
	// {"header":{"version":3,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0},"inheritedEventCount":0}
	// {"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}
	// {"type":"turn/end","seq":1,"time":11,"data":{"turn":1,"reason":{"kind":"completed"}}}
	// true resolved JSONL source filename identifies v2, but its header identifies v3
}
