export { SglangService, SglangServiceArgs } from "./sglangService";
export { readStackDeployment } from "./config";
export { parseDeployment, Deployment, DeploymentInput, ConfigError } from "./schema";
