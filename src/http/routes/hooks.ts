import { Hono } from "hono";
import type { AppEnv } from "../auth";

export const hookRoutes = new Hono<AppEnv>();
