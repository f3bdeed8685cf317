export { SglangFleet, SglangFleetArgs } from "./fleet";
