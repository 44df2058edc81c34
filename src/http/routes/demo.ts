import { Hono } from "hono";
import type { AppEnv } from "../auth";

export const demoRoutes = new Hono<AppEnv>();
