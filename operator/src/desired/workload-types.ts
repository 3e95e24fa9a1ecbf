/**
 * The Kubernetes workload objects the operator writes for a pool (apps/v1 StatefulSet,
 * core/v1 Service, policy/v1 PodDisruptionBudget), reduced to the fields it sets. The API
 * server fills in the rest; the reconcile loop applies these with server-side apply, so a
 * field left out here is not owned (and not fought over) by the operator.
 */
import type { LabelSelector, ObjectMeta, ResourceRequirements } from '@pglog/common/api/common.ts';

export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    secretKeyRef?: { name: string; key: string };
  };
}

export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  runAsGroup?: number;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { drop?: string[]; add?: string[] };
  seccompProfile?: { type: string };
}

export interface PodSecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  runAsGroup?: number;
  fsGroup?: number;
  seccompProfile?: { type: string };
}

/** One of httpGet and exec. */
export type Probe = ({ httpGet: { path: string; port: string | number } } | { exec: { command: string[] } }) & {
  initialDelaySeconds?: number;
  periodSeconds?: number;
  timeoutSeconds?: number;
  failureThreshold?: number;
};

export interface Container {
  name: string;
  image: string;
  imagePullPolicy?: string;
  command?: string[];
  args?: string[];
  env?: EnvVar[];
  ports?: Array<{ name: string; containerPort: number; protocol?: string }>;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  resources?: ResourceRequirements;
  securityContext?: SecurityContext;
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  /** `Always` on an init container makes it a native sidecar (Kubernetes >= 1.29). */
  restartPolicy?: string;
}

/** One source of a projected volume (only those pglog uses: the service account's files). */
export interface VolumeProjection {
  serviceAccountToken?: { path: string; expirationSeconds?: number; audience?: string };
  configMap?: { name: string; items?: Array<{ key: string; path: string }> };
  downwardAPI?: { items: Array<{ path: string; fieldRef: { apiVersion?: string; fieldPath: string } }> };
}

export interface Volume {
  name: string;
  emptyDir?: { medium?: string; sizeLimit?: string };
  projected?: { defaultMode?: number; sources: VolumeProjection[] };
}

export interface PodSpec {
  serviceAccountName?: string;
  automountServiceAccountToken?: boolean;
  terminationGracePeriodSeconds?: number;
  enableServiceLinks?: boolean;
  securityContext?: PodSecurityContext;
  initContainers?: Container[];
  containers: Container[];
  volumes?: Volume[];
}

export interface PodTemplateSpec {
  metadata: { labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: PodSpec;
}

export interface StatefulSet {
  apiVersion: 'apps/v1';
  kind: 'StatefulSet';
  metadata: ObjectMeta;
  spec: {
    replicas: number;
    serviceName: string;
    podManagementPolicy: 'Parallel' | 'OrderedReady';
    selector: LabelSelector;
    updateStrategy?: { type: 'RollingUpdate' | 'OnDelete' };
    template: PodTemplateSpec;
  };
}

export interface Service {
  apiVersion: 'v1';
  kind: 'Service';
  metadata: ObjectMeta;
  spec: {
    clusterIP?: string;
    selector: Record<string, string>;
    publishNotReadyAddresses?: boolean;
    ports: Array<{ name: string; port: number; targetPort: string | number; protocol?: string }>;
  };
}

export interface PodDisruptionBudget {
  apiVersion: 'policy/v1';
  kind: 'PodDisruptionBudget';
  metadata: ObjectMeta;
  spec: {
    maxUnavailable?: number | string;
    selector: LabelSelector;
  };
}
