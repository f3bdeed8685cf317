// One stack = one SGLang configuration on one GPU host. Reads and validates the stack's
// config, builds the component, exports what reviewers and benchmarks read.
import { readStackDeployment, SglangService } from "./components/sglang-service";

const { deployment, privateKey, secrets } = readStackDeployment();
const service = new SglangService("sglang", { deployment, privateKey, secrets });

export const host = deployment.host.address;
export const unitName = deployment.service.unitName;
export const unitHash = service.unitHash;
export const launchCommand = service.launchCommand;
export const serverArgs = service.serverArgs;
export const restartTimings = service.timings;
export const acceptLength = service.acceptLength;
