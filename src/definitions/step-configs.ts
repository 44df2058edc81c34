/**
 * Every place a definition holds a step's config, for the save-time checks that judge one kind of
 * step wherever it is: a top-level vertex (`/vertices/i/config`) and a MAP's per-item step
 * (`/vertices/i/config/step/config`, SPEC section 16). The key rules, the key lint, the keyless
 * writes, the verify rules, the secrets and the expression sites walk GATEWAY configs through
 * `gatewayConfigs`, so a Gateway inside a MAP gets every check a top-level one gets, with pointers
 * into the MAP. On the raw document, defensively (the schema may have refused something else).
 */
import { asArray, asRecord } from "./errors";
import { pointerOf, type PathSegment } from "./pointer";
import { MAP_DEFAULTS } from "./schema";

/** Inside a MAP's step: what its expressions see beside `payload` and `steps`. */
export interface MapScope {
  /** The MAP's `as` (default `item`): its expressions read the item under this name, and `index`. */
  itemName: string;
  /** The MAP's index in `/vertices`. */
  vertexIndex: number;
}

export interface StepConfigSite {
  /** The step's type as written (`GATEWAY`, `TRANSFORM`, …). */
  type: string;
  config: Record<string, unknown>;
  /** The path of `config` in the document. */
  base: PathSegment[];
  /** The vertex it belongs to (the MAP, for a MAP's step). */
  vertexIndex: number;
  /** Set for a MAP's step. */
  map?: MapScope;
}

/** The item name of a MAP config as written (the default when absent or not a string: the schema reports that). */
export function mapItemName(config: Record<string, unknown> | undefined): string {
  const name = config?.as;
  return typeof name === "string" ? name : MAP_DEFAULTS.as;
}

/** Every step config of the document, top-level vertices first in their order, each MAP's step right after its MAP. */
export function stepConfigs(document: unknown): StepConfigSite[] {
  const sites: StepConfigSite[] = [];
  asArray(asRecord(document)?.vertices).forEach((raw, i) => {
    const vertex = asRecord(raw);
    const config = asRecord(vertex?.config);
    if (!vertex || !config || typeof vertex.type !== "string") return;
    const base: PathSegment[] = ["vertices", i, "config"];
    sites.push({ type: vertex.type, config, base, vertexIndex: i });
    if (vertex.type !== "MAP") return;
    const step = asRecord(config.step);
    const stepConfig = asRecord(step?.config);
    // A nested MAP is refused (`map-nested`); its own step is not judged as this MAP's.
    if (!step || !stepConfig || typeof step.type !== "string" || step.type === "MAP") return;
    sites.push({
      type: step.type,
      config: stepConfig,
      base: [...base, "step", "config"],
      vertexIndex: i,
      map: { itemName: mapItemName(config), vertexIndex: i },
    });
  });
  return sites;
}

/** Every GATEWAY config: the top-level ones and those of MAP steps. */
export function gatewayConfigs(document: unknown): StepConfigSite[] {
  return stepConfigs(document).filter((site) => site.type === "GATEWAY");
}

/** A pointer builder under a step config (`at("headers", name)`). */
export function configPointer(site: StepConfigSite): (...path: PathSegment[]) => string {
  return (...path) => pointerOf(...site.base, ...path);
}
