import { Hono } from "hono";
import type { AppEnv } from "../auth";

export const executionRoutes = new Hono<AppEnv>();
