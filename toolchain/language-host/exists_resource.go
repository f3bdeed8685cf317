// Added to the upstream pulumi-language-nodejs v3.259.0 source when toolchain/ensure.sh
// builds it against the v3.276.0 SDK: that SDK's ResourceMonitor service has an
// ExistsResource RPC, and the host's monitor proxy must forward it like every other
// method or the package does not compile.
package main

import (
	"context"

	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

func (p *monitorProxy) ExistsResource(
	ctx context.Context, req *pulumirpc.ExistsResourceRequest,
) (*pulumirpc.ExistsResourceResponse, error) {
	return p.target.ExistsResource(ctx, req)
}
