import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts', 'test/seeds/**/*.test.ts'],
        },
      },
      {
        test: {
          name: 'property',
          include: ['test/property/**/*.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'model',
          include: ['test/model/**/*.test.ts'],
          testTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'redis',
          include: ['test/contract/**/*.test.ts'],
          testTimeout: 30_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'orchestration',
          include: ['test/orchestration/**/*.test.ts'],
          testTimeout: 60_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'types',
          include: [],
          typecheck: {
            enabled: true,
            only: true,
            include: ['test/types/**/*.test-d.ts'],
            tsconfig: './tsconfig.json',
          },
        },
      },
    ],
  },
});
