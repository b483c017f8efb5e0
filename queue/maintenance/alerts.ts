import { deliverPendingAlerts } from '../alerts.ts';
import { statementNow, type MaintenanceService } from './service.ts';

/**
 * Send the pending alerts (the number sent). A send that throws fails the pass with an
 * AlertDeliveryError; the alert stays pending for the next run.
 */
export const alertDeliveryService: MaintenanceService<number> = {
  runOnce: (ctx) => deliverPendingAlerts(ctx.sql, ctx.alerts, { now: statementNow(ctx) }),
};
