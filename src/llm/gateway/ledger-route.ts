// GET /api/ledger: an owner's balance and latest charges. It belongs to the owner-facing /api,
// so it answers in that API's error shape (index.ts registers it in a scope of its own).

import type { Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { type LedgerQuery, ledgerRoute } from './schemas.ts';
import type { GatewayRoutes } from './serve.ts';

export function registerLedger(scope: FastifyInstance, routes: GatewayRoutes): void {
  scope.get<{ Querystring: Static<typeof LedgerQuery> }>(
    '/api/ledger',
    { schema: ledgerRoute, onRequest: routes.auth.hook },
    async (req) => {
      const who = routes.auth.of(req).owner;
      const limit = req.query.limit ?? 100;
      const { ledger } = routes;
      return { owner: who, balanceUsd: Number(await ledger.balance(who)), entries: await ledger.entries(who, limit) };
    },
  );
}
