import { Hono } from "hono";
import type { AppEnv } from "../auth";

export const triggerRoutes = new Hono<AppEnv>();
