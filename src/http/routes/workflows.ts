import { Hono } from "hono";
import type { AppEnv } from "../auth";

export const workflowRoutes = new Hono<AppEnv>();
