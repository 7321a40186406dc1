import { StrictMode, useEffect } from 'react';
import { createRoot } from 'react-dom/client';
import { api } from './api.js';
import { useResource } from './hooks.js';
import { match, useLocation } from './router.js';
import { routes } from './routes.js';
import './styles.css';

function App() {
  const location = useLocation();
  const found = match(routes, location.path);
  const info = useResource('info', api.info);
  const title = found ? found.route.title : 'Not found';
  useEffect(() => {
    document.title = `${title} · TurnKit console`;
  }, [title]);
  const View = found?.route.view;
  return (
    <>
      <a
        className="skip"
        href="#main"
        onClick={(event) => {
          // The hash is the router's: focus the content without navigating.
          event.preventDefault();
          document.getElementById('main')?.focus();
        }}
      >
        Skip to content
      </a>
      <header className="top">
        <span className="brand">TurnKit console</span>
        <nav aria-label="Views">
          {routes
            .filter((route) => route.nav)
            .map((route) => {
              const active =
                found?.route.path === route.path || (route.path === '/turns' && location.path === '/');
              return (
                <a key={route.path} href={`#${route.path}`} aria-current={active ? 'page' : undefined}>
                  {route.nav}
                </a>
              );
            })}
        </nav>
        <span className="who">
          {info.data
            ? info.data.authenticated
              ? `signed in: ${JSON.stringify(info.data.principal)}`
              : 'loopback only (no auth hook)'
            : ''}
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        {View && found ? (
          <View params={found.params} query={location.query} />
        ) : (
          <p role="alert">No such page: {location.path}</p>
        )}
      </main>
    </>
  );
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
